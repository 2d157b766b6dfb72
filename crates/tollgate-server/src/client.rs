//! The HTTP/1 client of `tollgate check`, `tollgate bench` and
//! `tollgate override`: one keep-alive connection to a running service,
//! its `POST /v1/check`, and any request answered as its status and text.

use http_body_util::{BodyExt, Full};
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
    request(authority, http::Method::POST, "/v1/check", token, body)
}

/// `method path` with a JSON `body`, and the token if there is one.
pub(crate) fn request(
    authority: &str,
    method: http::Method,
    path: &str,
    token: Option<&str>,
    body: String,
) -> Result<http::Request<Full<Bytes>>, String> {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())
}

/// Sends `request` on a new connection to `url`: the status and the body's
/// text, trimmed.
pub(crate) async fn send(
    url: &str,
    method: http::Method,
    path: &str,
    token: Option<&str>,
    body: String,
) -> Result<(u16, String), String> {
    let authority = authority(url)?;
    let mut sender = connect(&authority).await?;
    let request = request(&authority, method, path, token, body)?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).trim().to_string()))
}

/// Runs `f` on a current-thread runtime; an error if none can be built.
pub(crate) fn block_on<T>(f: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(f)
}
