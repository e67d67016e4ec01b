// The host side of MCP Apps for tests/interop/test_browser.py, built on the official ext-apps
// SDK (its AppBridge): renders a view — the HTML a server's `resources/read` gave — in a
// sandboxed iframe (scripts only, no same-origin), connects it over postMessage, and hands it
// the tool's input and result as a host does. The view's own tool calls go to
// `window.hostCallTool`, which the test binds to its MCP client (the same session that made
// the result, as a host would).
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.showApp = async ({ html, input, result, theme }) => {
  const iframe = document.createElement("iframe");
  iframe.sandbox = "allow-scripts";
  iframe.style.cssText = "width: 960px; height: 900px; border: 0";
  document.body.replaceChildren(iframe);
  const bridge = new AppBridge(
    null,
    { name: "loom-test-host", version: "1.0.0" },
    { serverTools: {}, logging: {} },
    { hostContext: { theme, displayMode: "inline" } },
  );
  bridge.oncalltool = async (params) => window.hostCallTool(params);
  const initialized = new Promise((resolve) => {
    bridge.oninitialized = resolve;
  });
  // Connected before the page loads: the view asks to initialize as soon as it runs.
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = html;
  await initialized;
  await bridge.sendToolInput({ arguments: input });
  await bridge.sendToolResult(result);
  window.appBridge = bridge;
  return "shown";
};
