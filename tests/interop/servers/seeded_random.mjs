// Preloaded into a Node server (`node --import <this file> server.js`) so that its
// Math.random gives the same numbers in every process: the same calls then give the same data
// directly and through loom, and a test can compare them. A 31-bit linear congruential
// generator; quality is beside the point.
let state = 20261203;
Math.random = () => {
  state = (state * 1103515245 + 12345) % 2147483648;
  return state / 2147483648;
};
