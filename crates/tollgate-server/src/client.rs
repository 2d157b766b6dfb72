//! The HTTP/1 client of `tollgate check` and `tollgate bench`: one
//! keep-alive connection to a running service, and its `POST /v1/check`.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

/// `host:port` of an `http://` URL.
pub(crate) fn authority(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url must start with http://, got {url:?}"))?;
    Ok(rest.split('/').next().unwrap_or(rest).to_string())
}

/// A connection to `authority`, its driver spawned on the runtime.
pub(crate) async fn connect(authority: &str) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

/// `POST /v1/check` with a JSON `body`, and the token if there is one.
pub(crate) fn check_request(
    authority: &str,
    token: Option<&str>,
    body: String,
) -> Result<http::Request<Full<Bytes>>, String> {
    let mut request = http::Request::post("/v1/check")
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())
}
