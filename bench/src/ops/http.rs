//! A minimal HTTP/1.1 client over `std::net::TcpStream` for the lab's own
//! loopback endpoints (the operator channel, the metrics scrape). One
//! request per connection (`Connection: close`); replies with
//! `Content-Length`, chunked or close-delimited bodies are read whole.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use thiserror::Error;

/// How long a connect, a write or a read may take before the request fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One reply: the status code and the body as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// HTTP status code (200, 400, 422, ...).
    pub status: u16,
    /// The body, decoded as UTF-8 (lossy).
    pub body: String,
}

/// A request that got no readable reply.
#[derive(Debug, Error)]
pub enum HttpClientError {
    /// Nothing listens at the address, or the exchange failed midway.
    #[error("cannot reach {addr} (is a run with that address live?)")]
    Io {
        /// The address tried.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The peer answered something that is not HTTP/1.x.
    #[error("{addr} answered something that is not an HTTP reply: {detail}")]
    Malformed {
        /// The address tried.
        addr: SocketAddr,
        /// What was wrong.
        detail: String,
    },
}

/// Send `method path` to `addr` with an optional JSON `body` and read the
/// whole reply. Errors: [`HttpClientError`] (no listener, timeout after
/// [`IO_TIMEOUT`], or a reply that is not HTTP).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<HttpReply, HttpClientError> {
    let io = |source| HttpClientError::Io { addr, source };
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(io)?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).map_err(io)?;
    stream.write_all(body.as_bytes()).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(io)?;
    parse_reply(&raw).map_err(|detail| HttpClientError::Malformed { addr, detail })
}

/// Parse a whole HTTP/1.x reply. Errors: what is wrong, as text.
fn parse_reply(raw: &[u8]) -> Result<HttpReply, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "content-length" {
            length = v.parse::<usize>().ok();
        } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n)
            .ok_or("body shorter than Content-Length")?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(HttpReply {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Decode a chunked body. Errors: a malformed chunk, as text.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size without end of line")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size {size_hex:?}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).ok_or("chunk shorter than its size")?;
        out.extend_from_slice(chunk);
        rest = rest
            .get(size + 2..)
            .ok_or("chunk without its end of line")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_chunked_and_close_delimited_replies() {
        let r = parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "hello"));
        let r = parse_reply(
            b"HTTP/1.1 422 Unprocessable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_str()), (422, "abcde"));
        let r = parse_reply(b"HTTP/1.0 404 Not Found\r\n\r\nno such path").unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "no such path"));
    }

    #[test]
    fn refuses_what_is_not_http() {
        assert!(parse_reply(b"SSH-2.0-x\r\n\r\n").is_err());
        assert!(parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(parse_reply(b"HTTP/1.1 200 OK").is_err());
    }
}
