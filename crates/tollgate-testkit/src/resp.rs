//! A deliberately tiny, blocking RESP2 client used by the harness itself
//! (readiness checks, identity checks, topology polling, key scans).
//!
//! It only ever connects to `127.0.0.1` and every operation has a timeout, so
//! a SIGSTOPped or dead server can never hang the harness.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply as text: status, bulk string (lossy UTF-8) or integer.
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Reply::Status(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Int(i) => Some(i.to_string()),
            _ => None,
        }
    }
}

/// A blocking connection to a server on `127.0.0.1`.
pub(crate) struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connects to `127.0.0.1:port`; `timeout` bounds the connect and every
    /// later read and write.
    pub(crate) fn connect(port: u16, timeout: Duration) -> io::Result<Conn> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn {
            writer: stream,
            reader,
        })
    }

    /// Sends several commands in one write and reads one reply per command.
    pub(crate) fn pipeline<A: AsRef<[u8]>>(&mut self, cmds: &[Vec<A>]) -> io::Result<Vec<Reply>> {
        let mut buf = Vec::new();
        for args in cmds {
            encode(&mut buf, args);
        }
        self.writer.write_all(&buf)?;
        cmds.iter().map(|_| read_reply(&mut self.reader)).collect()
    }

    /// Sends one command and reads its reply. Error replies are `Ok(Reply::Error)`.
    pub(crate) fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Reply> {
        let mut buf = Vec::new();
        encode(&mut buf, args);
        self.writer.write_all(&buf)?;
        read_reply(&mut self.reader)
    }

    /// Like [`Conn::cmd`] but expects a textual reply (status or bulk string).
    pub(crate) fn text<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<String> {
        match self.cmd(args)? {
            Reply::Error(e) => Err(io::Error::other(e)),
            r => r
                .text()
                .ok_or_else(|| io::Error::other(format!("unexpected reply {r:?}"))),
        }
    }
}

fn encode<A: AsRef<[u8]>>(buf: &mut Vec<u8>, args: &[A]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(if line.is_empty() {
            io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")
        } else {
            bad("truncated line")
        });
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| bad("non UTF-8 line"))
}

fn read_len(s: &str) -> io::Result<i64> {
    s.parse().map_err(|_| bad(format!("bad length {s:?}")))
}

pub(crate) fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(line.len().min(1));
    Ok(match kind {
        "+" => Reply::Status(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(read_len(rest)?),
        "$" => {
            let n = read_len(rest)?;
            if n < 0 {
                Reply::Bulk(None)
            } else {
                let n = usize::try_from(n).map_err(|_| bad("bulk too long"))?;
                let mut data = vec![0; n + 2];
                r.read_exact(&mut data)?;
                if !data.ends_with(b"\r\n") {
                    return Err(bad("bulk string without CRLF"));
                }
                data.truncate(n);
                Reply::Bulk(Some(data))
            }
        }
        "*" => {
            let n = read_len(rest)?;
            if n < 0 {
                Reply::Array(None)
            } else {
                let mut items = Vec::new();
                for _ in 0..n {
                    items.push(read_reply(r)?);
                }
                Reply::Array(Some(items))
            }
        }
        _ => return Err(bad(format!("unexpected reply line {line:?}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> io::Result<Reply> {
        read_reply(&mut BufReader::new(bytes))
    }

    #[test]
    fn parses_all_resp2_types() {
        assert_eq!(parse(b"+PONG\r\n").unwrap(), Reply::Status("PONG".into()));
        assert_eq!(parse(b"-ERR x\r\n").unwrap(), Reply::Error("ERR x".into()));
        assert_eq!(parse(b":-2\r\n").unwrap(), Reply::Int(-2));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Reply::Bulk(None));
        assert_eq!(
            parse(b"$4\r\na\r\nb\r\n").unwrap(),
            Reply::Bulk(Some(b"a\r\nb".to_vec()))
        );
        assert_eq!(
            parse(b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n").unwrap(),
            Reply::Array(Some(vec![
                Reply::Bulk(Some(b"0".to_vec())),
                Reply::Array(Some(vec![Reply::Bulk(Some(b"k".to_vec()))])),
            ]))
        );
        assert!(parse(b"").is_err());
        assert!(parse(b"$3\r\nab").is_err());
        assert!(parse(b"?x\r\n").is_err());
    }

    #[test]
    fn encodes_commands() {
        let mut buf = Vec::new();
        encode(&mut buf, &["SET", "k", ""]);
        assert_eq!(buf, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
