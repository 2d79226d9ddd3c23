//! The stdio transport to a command server, with a message limit of our own: rmcp's child
//! process transport drops a line over 16 MiB and waits on, so a large reply (a 10 MB file,
//! JSON-escaped) vanished and its call hung until its timeout. Here a message may be as large
//! as `maxMessageBytes`, and one over it ends the connection at once, its size recorded, so
//! the calls in flight fail saying why. Progress is taken here too, in the order it came: the
//! SDK hands notifications to tasks of their own, so the last tick of a call was often
//! handled after its result, when nobody listened any more.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use process_wrap::tokio::ChildWrapper;
use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ProgressNotificationParam, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};

/// Why the last connection ended because of a message too large, if it did.
pub(crate) type Oversized = Arc<Mutex<Option<String>>>;

/// What becomes of a progress notification.
pub(crate) type OnProgress = Box<dyn Fn(ProgressNotificationParam) + Send + Sync>;

/// A started command server as an rmcp transport; the process (its group) is killed when
/// the transport is dropped.
pub(crate) struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    transport: AsyncRwTransport<RoleClient, LineLimit, ChildStdin>,
    on_progress: OnProgress,
}

impl ChildTransport {
    /// Takes the child's stdin and stdout; messages over `limit` bytes end the connection,
    /// and `oversized` says so.
    pub(crate) fn new(
        mut child: Box<dyn ChildWrapper>,
        limit: usize,
        oversized: Oversized,
        on_progress: OnProgress,
    ) -> io::Result<Self> {
        let stdin = child
            .inner_mut()
            .stdin()
            .take()
            .ok_or_else(|| io::Error::other("the server's stdin was already taken"))?;
        let stdout = child
            .inner_mut()
            .stdout()
            .take()
            .ok_or_else(|| io::Error::other("the server's stdout was already taken"))?;
        let reader = LineLimit {
            inner: stdout,
            limit,
            line: 0,
            oversized,
        };
        // The reader enforces the limit, so that an oversized message is an error, not a
        // line rmcp skips.
        let transport =
            AsyncRwTransport::new_client(reader, stdin).with_max_line_length(usize::MAX);
        Ok(Self {
            child: Some(child),
            transport,
            on_progress,
        })
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            // `kill` waits for the process too, so it leaves no zombie.
            runtime.spawn(async move {
                let _ = Box::into_pin(child.kill()).await;
            });
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.transport.receive().await;
        if let Some(JsonRpcMessage::Notification(notification)) = &message
            && let ServerNotification::ProgressNotification(progress) = &notification.notification
        {
            (self.on_progress)(progress.params.clone());
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        if let Some(mut child) = self.child.take() {
            Box::into_pin(child.kill()).await?;
        }
        Ok(())
    }
}

/// The server's stdout, failing once a line (one message) grows past `limit` bytes.
pub(crate) struct LineLimit {
    inner: ChildStdout,
    limit: usize,
    /// Bytes of the current line so far.
    line: usize,
    oversized: Oversized,
}

impl AsyncRead for LineLimit {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buffer.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(context, buffer);
        if !matches!(polled, Poll::Ready(Ok(()))) {
            return polled;
        }
        let read = &buffer.filled()[before..];
        let mut line = self.line;
        for byte in read {
            if *byte == b'\n' {
                line = 0;
            } else {
                line += 1;
                if line > self.limit {
                    let why = format!(
                        "it sent a message of more than {} bytes (its maxMessageBytes)",
                        self.limit
                    );
                    *self
                        .oversized
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(why.clone());
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why)));
                }
            }
        }
        self.line = line;
        Poll::Ready(Ok(()))
    }
}
