//! A local HTTP/1.1 endpoint that answers every request with the same 200 response, shared by
//! the benches that need something to talk to (an OTLP collector, a chat-completions
//! endpoint) and measure loom's side only (`#[path]`-included: each bench is its own crate).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// Start the endpoint: every request on every connection gets `200` with `content_type` and
/// `body`. Its address.
pub fn start(content_type: &'static str, body: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let response = response.clone();
            std::thread::spawn(move || answer_each(stream, response.as_bytes()));
        }
    });
    address
}

/// Read request after request (headers, then `content-length` bytes) and answer each.
fn answer_each(stream: TcpStream, response: &[u8]) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if reader.get_mut().write_all(response).is_err() {
            return;
        }
    }
}
