//! Shared test helpers: archive builders (including hostile ones) and a real HTTP server on
//! 127.0.0.1.
#![allow(dead_code)]

pub mod cue;
pub mod monitoring;

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

/// One raw tar entry: names and link targets are written verbatim (the tar crate's own path
/// setters refuse `..`, which is exactly what these tests need to produce).
pub struct RawEntry {
    pub name: Vec<u8>,
    pub kind: tar::EntryType,
    pub link: Option<Vec<u8>>,
    pub data: Vec<u8>,
    pub mode: u32,
}

pub fn file(name: &str, data: &[u8]) -> RawEntry {
    RawEntry {
        name: name.as_bytes().to_vec(),
        kind: tar::EntryType::Regular,
        link: None,
        data: data.to_vec(),
        mode: 0o644,
    }
}

pub fn dir(name: &str) -> RawEntry {
    RawEntry {
        name: name.as_bytes().to_vec(),
        kind: tar::EntryType::Directory,
        link: None,
        data: vec![],
        mode: 0o755,
    }
}

pub fn symlink(name: &str, target: &str) -> RawEntry {
    RawEntry {
        name: name.as_bytes().to_vec(),
        kind: tar::EntryType::Symlink,
        link: Some(target.as_bytes().to_vec()),
        data: vec![],
        mode: 0o777,
    }
}

pub fn special(name: &str, kind: tar::EntryType, link: Option<&str>) -> RawEntry {
    RawEntry {
        name: name.as_bytes().to_vec(),
        kind,
        link: link.map(|l| l.as_bytes().to_vec()),
        data: vec![],
        mode: 0o644,
    }
}

/// An uncompressed tar stream of `entries`.
pub fn tar_bytes(entries: &[RawEntry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        {
            let gnu = h.as_gnu_mut().expect("gnu header");
            if e.name.len() >= gnu.name.len() {
                // GNU long-name record: the next header's name is this record's data.
                let mut long = tar::Header::new_gnu();
                long.as_gnu_mut().expect("gnu header").name[..13].copy_from_slice(b"././@LongLink");
                long.set_entry_type(tar::EntryType::GNULongName);
                let mut data = e.name.clone();
                data.push(0);
                long.set_size(data.len() as u64);
                long.set_mode(0o644);
                long.set_mtime(0);
                long.set_cksum();
                b.append(&long, data.as_slice()).expect("append long name");
            }
            let n = e.name.len().min(gnu.name.len() - 1);
            gnu.name[..n].copy_from_slice(&e.name[..n]);
            if let Some(link) = &e.link {
                gnu.linkname[..link.len()].copy_from_slice(link);
            }
        }
        h.set_entry_type(e.kind);
        h.set_size(e.data.len() as u64);
        h.set_mode(e.mode);
        h.set_mtime(0);
        h.set_cksum();
        b.append(&h, e.data.as_slice()).expect("append");
    }
    b.into_inner().expect("finish tar")
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("gzip");
    enc.finish().expect("gzip finish")
}

pub fn tar_gz(entries: &[RawEntry]) -> Vec<u8> {
    gzip(&tar_bytes(entries))
}

/// Zip entries: (name, content, unix mode or None, symlink?).
pub enum ZipEntry<'a> {
    File(&'a str, &'a [u8]),
    Mode(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
}

pub fn zip_bytes(entries: &[ZipEntry<'_>]) -> Vec<u8> {
    use zip::write::SimpleFileOptions;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for e in entries {
        match e {
            ZipEntry::File(name, data) => {
                w.start_file(*name, opts).expect("start");
                w.write_all(data).expect("write");
            }
            ZipEntry::Mode(name, data, mode) => {
                w.start_file(*name, opts.unix_permissions(*mode))
                    .expect("start");
                w.write_all(data).expect("write");
            }
            ZipEntry::Dir(name) => w.add_directory(*name, opts).expect("dir"),
            ZipEntry::Symlink(name, target) => w.add_symlink(*name, *target, opts).expect("link"),
        }
    }
    w.finish().expect("finish zip").into_inner()
}

pub fn digest_of(bytes: &[u8]) -> String {
    opm_operator::artifact::fetch::Sha256Digest::of(bytes).to_string()
}

/// Names in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// What the test HTTP server answers on one path.
#[derive(Clone)]
pub enum Route {
    /// 200 with these bytes and a Content-Length.
    Bytes(Vec<u8>),
    /// 200, chunked (no Content-Length).
    Chunked(Vec<u8>),
    /// This status, empty body.
    Status(u16),
    /// Waits, then 200 with the bytes.
    Slow(Duration, Vec<u8>),
    /// Sends the first bytes, then breaks the stream.
    Broken(Vec<u8>),
    /// Sends the first bytes, then goes silent for the duration before finishing.
    Stall(Vec<u8>, Duration),
    /// 302 Found to this location.
    Redirect(String),
}

/// A real HTTP server (axum on hyper) on 127.0.0.1; counts requests per path.
pub struct TestServer {
    pub base: String,
    hits: Arc<std::sync::Mutex<HashMap<String, usize>>>,
    task: JoinHandle<()>,
}

impl TestServer {
    pub async fn start(routes: Vec<(&str, Route)>) -> Self {
        let routes: Arc<HashMap<String, Route>> =
            Arc::new(routes.into_iter().map(|(p, r)| (p.to_owned(), r)).collect());
        let hits: Arc<std::sync::Mutex<HashMap<String, usize>>> = Arc::default();
        let counter = hits.clone();
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let routes = routes.clone();
            let counter = counter.clone();
            async move {
                *counter
                    .lock()
                    .unwrap()
                    .entry(uri.path().to_owned())
                    .or_default() += 1;
                respond(routes.get(uri.path()).cloned()).await
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        Self {
            base: format!("http://{addr}"),
            hits,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn respond(route: Option<Route>) -> Response {
    let status = |s: u16| {
        Response::builder()
            .status(StatusCode::from_u16(s).unwrap())
            .body(Body::empty())
            .unwrap()
    };
    match route {
        None => status(404),
        Some(Route::Status(s)) => status(s),
        Some(Route::Redirect(to)) => Response::builder()
            .status(StatusCode::FOUND)
            .header("location", to)
            .body(Body::empty())
            .unwrap(),
        Some(Route::Bytes(b)) => Response::new(Body::from(b)),
        Some(Route::Slow(d, b)) => {
            tokio::time::sleep(d).await;
            Response::new(Body::from(b))
        }
        Some(Route::Chunked(b)) => {
            let chunks: Vec<Result<Bytes, std::io::Error>> = b
                .chunks(16 * 1024)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect();
            Response::new(Body::from_stream(futures_util::stream::iter(chunks)))
        }
        Some(Route::Stall(b, pause)) => {
            use futures_util::StreamExt;
            let first = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from(b))]);
            let rest = futures_util::stream::once(async move {
                tokio::time::sleep(pause).await;
                Ok(Bytes::from_static(b"end"))
            });
            Response::new(Body::from_stream(first.chain(rest)))
        }
        Some(Route::Broken(b)) => {
            use futures_util::StreamExt;
            // The pause lets the headers and first bytes reach the client before the break.
            let first = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from(b))]);
            let broken = futures_util::stream::once(async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(std::io::Error::other("server broke the stream"))
            });
            Response::new(Body::from_stream(first.chain(broken)))
        }
    }
}

/// A raw TCP server that promises `claimed` bytes and sends only `body`, then closes: the
/// truncated download hyper will not produce on the server side.
pub async fn serve_short_body(claimed: usize, body: Vec<u8>) -> (String, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n"
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(&body).await;
            let _ = sock.shutdown().await;
        }
    });
    (format!("http://{addr}/artifact.tar.gz"), task)
}

/// A port on 127.0.0.1 that nothing listens on.
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

pub fn hit_count(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

/// Rewrites the unix mode of `name` in a zip's central directory (the writer only lets callers
/// set permission bits, not the file type a hostile archive may claim).
pub fn zip_set_mode(mut zip: Vec<u8>, name: &str, mode: u32) -> Vec<u8> {
    let mut i = 0;
    while i + 46 <= zip.len() {
        if zip[i..i + 4] == [b'P', b'K', 1, 2] {
            let name_len = u16::from_le_bytes([zip[i + 28], zip[i + 29]]) as usize;
            if &zip[i + 46..i + 46 + name_len] == name.as_bytes() {
                zip[i + 5] = 3; // made by: unix
                zip[i + 38..i + 42].copy_from_slice(&(mode << 16).to_le_bytes());
                return zip;
            }
        }
        i += 1;
    }
    panic!("{name} not in the central directory");
}
