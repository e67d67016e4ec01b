//! loom's own stdin and stdout as asynchronous streams that the runtime polls directly.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and write to the blocking thread pool: a
//! thread hop and two context switches each way on every message, which was most of what a
//! pass-through call cost (issue 17, benches/README.md). When stdin and stdout are pipes (how
//! Python's and most SDKs' clients start a server) or Unix sockets (Node's `child_process`
//! gives socket pairs), they are registered with the runtime's epoll instead. Anything else (a
//! terminal, a regular file) keeps tokio's blocking streams, which work on every kind of file.

use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Where loom reads its client's messages from.
pub(crate) enum StdinStream {
    Pipe(tokio::net::unix::pipe::Receiver),
    Socket(tokio::net::UnixStream),
    Blocking(tokio::io::Stdin),
}

/// Where loom writes its messages to its client.
pub(crate) enum StdoutStream {
    Pipe(tokio::net::unix::pipe::Sender),
    Socket(tokio::net::UnixStream),
    Blocking(tokio::io::Stdout),
}

/// Stdin, polled by the runtime when it is a pipe or a socket. Must be called inside the
/// runtime.
pub(crate) fn stdin() -> StdinStream {
    polled(std::io::stdin().as_fd(), StdinStream::Socket, |fd| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map(StdinStream::Pipe)
    })
    .unwrap_or_else(|| StdinStream::Blocking(tokio::io::stdin()))
}

/// Stdout, polled by the runtime when it is a pipe or a socket. Must be called inside the
/// runtime.
pub(crate) fn stdout() -> StdoutStream {
    polled(std::io::stdout().as_fd(), StdoutStream::Socket, |fd| {
        tokio::net::unix::pipe::Sender::from_owned_fd(fd).map(StdoutStream::Pipe)
    })
    .unwrap_or_else(|| StdoutStream::Blocking(tokio::io::stdout()))
}

/// `fd` as a socket or a pipe registered with the runtime; `None` for anything else (tokio's
/// pipe types refuse what is not a FIFO).
fn polled<T>(
    fd: std::os::fd::BorrowedFd<'_>,
    as_socket: fn(tokio::net::UnixStream) -> T,
    as_pipe: impl FnOnce(OwnedFd) -> std::io::Result<T>,
) -> Option<T> {
    let fd = duplicate(fd)?;
    if is_socket(&fd) {
        socket(fd).map(as_socket)
    } else {
        as_pipe(fd).ok()
    }
}

/// A descriptor of its own for the stream: dropping it closes the duplicate, never fd 0 or 1.
/// The duplicate shares the open file with fd 0/1, so making it non-blocking makes those
/// non-blocking too; nothing else in loom reads stdin or writes stdout.
fn duplicate(fd: std::os::fd::BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

fn is_socket(fd: &OwnedFd) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fd.try_clone()
        .map(std::fs::File::from)
        .and_then(|file| file.metadata())
        .is_ok_and(|meta| meta.file_type().is_socket())
}

fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket).ok()
}

impl AsyncRead for StdinStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Self::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            Self::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for StdoutStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            Self::Socket(socket) => Pin::new(socket).poll_write(cx, buf),
            Self::Blocking(stdout) => Pin::new(stdout).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Self::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Self::Blocking(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Self::Socket(socket) => Pin::new(socket).poll_shutdown(cx),
            Self::Blocking(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}
