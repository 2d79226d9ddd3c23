//! Where logs and traces go: log lines on stderr (text or JSON), and OpenTelemetry spans over
//! OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
//!
//! The spans are the `tracing` spans the crates open (`request`, `invoke_agent`, `chat`,
//! `execute_code`, `execute_tool`; see `agentic_core::telemetry`). The exporter runs on its own
//! thread and sends over the process's tokio runtime: protobuf or JSON over HTTP through the
//! same reqwest client as the rest of agentic, or gRPC through tonic
//! (`OTEL_EXPORTER_OTLP_PROTOCOL`, or `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`: `http/protobuf`
//! by default, `http/json`, `grpc`). The other standard variables (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `OTEL_SDK_DISABLED`)
//! apply as the OpenTelemetry SDK reads them.

use std::fmt;
use std::io::{IsTerminal, Write as _};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{
    Protocol, RetryPolicy, WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _,
};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_core::Level;
use tracing_subscriber::Layer as _;
use tracing_subscriber::field::{RecordFields, Visit};
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime as _;
use tracing_subscriber::fmt::{FormatFields, FormattedFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::LogFormat;

/// What the OpenTelemetry layer passes on: every span and event at info and above, except
/// those of the exporter's own HTTP and gRPC stack (which would trace its own exports).
const TRACE_FILTER: &str = "info,h2=off,hyper=off,hyper_util=off,tonic=off,tower=off,\
                            reqwest=off,opentelemetry=off,opentelemetry_sdk=off,\
                            opentelemetry_otlp=off,opentelemetry_http=off,sqlx=warn";

/// The OpenTelemetry SDK's own log lines (an export that failed, a shutdown that timed out):
/// a one-shot command says once, itself, that its traces were not sent.
const SDK_LOGS_OFF: &str =
    "opentelemetry=off,opentelemetry_sdk=off,opentelemetry_otlp=off,opentelemetry_http=off";

/// How long a one-shot command waits for its last spans to be sent: a collector that is down
/// or does not answer must not hold up a command whose own work took a fraction of that.
const ONE_SHOT_FLUSH: Duration = Duration::from_secs(1);
/// How long `agentic serve` waits for its last spans once it has stopped.
const SERVER_FLUSH: Duration = Duration::from_secs(5);

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The installed exporter, flushed and stopped by [`Telemetry::shutdown`].
#[derive(Debug)]
pub(crate) struct Telemetry {
    traces: Option<SdkTracerProvider>,
    flush: Duration,
    failure: Failure,
}

impl Telemetry {
    /// Sends the spans still queued, waiting at most the command's flush deadline. Call it
    /// after the work is done and while the tokio runtime is still up (the HTTP exporter sends
    /// through it), outside of it.
    pub(crate) fn shutdown(self) {
        let Some(traces) = self.traces else { return };
        let stopped = traces.shutdown_with_timeout(self.flush);
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let why = match (stopped, failure) {
            (Err(opentelemetry_sdk::error::OTelSdkError::Timeout(_)), _) => format!(
                "the collector did not answer within {} ms",
                self.flush.as_millis()
            ),
            (_, Some(failure)) => failure,
            (Err(error), None) => error.to_string(),
            (Ok(()), None) => return,
        };
        say(Level::WARN, &format!("traces were not all sent: {why}"));
    }
}

/// Sets the format of [`say`]'s lines; the first call wins. Call it before anything is said.
pub(crate) fn set_format(format: LogFormat) {
    let _ = FORMAT.set(format);
}

/// One line on stderr that the command itself says (where it listens, that it stopped, why it
/// failed), whatever the log filter: `agentic: <message>` as text, or a JSON object of the
/// same shape as the log's lines, so that a collector reading `--log-format json` reads every
/// line.
pub(crate) fn say(level: Level, message: &str) {
    let line = match FORMAT.get() {
        Some(LogFormat::Json) => {
            let mut timestamp = String::new();
            let _ = tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut Writer::new(&mut timestamp));
            serde_json::json!({
                "timestamp": timestamp,
                "level": level.as_str(),
                "message": message,
                "target": "agentic",
            })
            .to_string()
        }
        Some(LogFormat::Text) | None => format!("agentic: {message}"),
    };
    // Whoever started us may have stopped reading stderr by now.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Installs the log subscriber and, when the environment names an OTLP endpoint, the trace
/// exporter. Must run inside the tokio runtime (`Runtime::enter`).
///
/// Log lines are filtered by `AGENTIC_LOG` or else `RUST_LOG` (`tracing`'s directives, e.g.
/// `agentic_api=debug,info`). Without either, a server logs at info (a line per request) and
/// other commands only warnings, so stdout and stderr stay the command's own.
pub(crate) fn init(format: LogFormat, serve: bool, record_payloads: bool) -> Telemetry {
    set_format(format);
    agentic_core::telemetry::set_record_payloads(record_payloads);
    let default = if serve {
        "info".to_owned()
    } else {
        format!("warn,sqlx=error,{SDK_LOGS_OFF}")
    };
    let wanted = ["AGENTIC_LOG", "RUST_LOG"].iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
    });
    // The GenAI spans go to traces, not to log lines, unless the directives name them.
    let wanted = wanted.map(|mut directives| {
        if !directives.contains(agentic_core::telemetry::SPANS) {
            directives = format!("{directives},{}=off", agentic_core::telemetry::SPANS);
        }
        if !serve && !directives.contains("opentelemetry") {
            directives = format!("{directives},{SDK_LOGS_OFF}");
        }
        directives
    });
    let default = format!("{default},{}=off", agentic_core::telemetry::SPANS);
    let default = default.as_str();
    let filter = match wanted {
        Some(directives) => {
            tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|error| {
                say(
                    Level::WARN,
                    &format!(
                        "the log filter \"{directives}\" is invalid ({error}); using \"{default}\""
                    ),
                );
                tracing_subscriber::EnvFilter::new(default)
            })
        }
        None => tracing_subscriber::EnvFilter::new(default),
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Json => logs.json().flatten_event(true).with_filter(filter).boxed(),
        LogFormat::Text => logs
            .fmt_fields(TextFields)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter)
            .boxed(),
    };
    let failure = Failure::default();
    let traces = match trace_provider(serve, &failure) {
        Ok(traces) => traces,
        Err(error) => {
            say(Level::WARN, &format!("traces are off: {error:#}"));
            None
        }
    };
    let trace_layer = traces.as_ref().map(|provider| {
        // Spans at info and above; of events only warnings and errors (as span events): a
        // request's own log line would only repeat its span's attributes.
        let events = tracing_subscriber::filter::filter_fn(|metadata| {
            metadata.is_span() || *metadata.level() <= tracing_core::Level::WARN
        });
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("agentic"))
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_context_activation(false)
            .with_filter(tracing_subscriber::EnvFilter::new(TRACE_FILTER).and(events))
    });
    if traces.is_some() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
    }
    // A second subscriber (there is none) would be the only way to fail: nothing to report.
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(trace_layer)
        .try_init();
    Telemetry {
        traces,
        flush: if serve { SERVER_FLUSH } else { ONE_SHOT_FLUSH },
        failure,
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// The tracer provider the environment asks for, if any. A one-shot command sends each batch
/// once: retrying a collector that is down would only delay its exit.
fn trace_provider(serve: bool, failure: &Failure) -> anyhow::Result<Option<SdkTracerProvider>> {
    let endpoint =
        env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"));
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|value| value.eq_ignore_ascii_case("none"));
    if endpoint.is_none() || disabled {
        return Ok(None);
    }
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".to_owned());
    let retry = if serve {
        RetryPolicy::default()
    } else {
        RetryPolicy::disabled()
    };
    let exporter = match protocol.as_str() {
        "grpc" => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_retry_policy(retry)
            .build()
            .context("the OTLP gRPC exporter")?,
        "http/protobuf" | "http/json" => {
            let runtime = tokio::runtime::Handle::try_current()
                .context("the OTLP HTTP exporter needs the tokio runtime")?;
            let client = TokioHttpClient {
                client: reqwest::Client::new(),
                runtime,
            };
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_retry_policy(retry)
                .with_protocol(if protocol == "http/json" {
                    Protocol::HttpJson
                } else {
                    Protocol::HttpBinary
                })
                .build()
                .context("the OTLP HTTP exporter")?
        }
        other => anyhow::bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL is \"{other}\"; agentic speaks grpc, http/protobuf and \
             http/json"
        ),
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("agentic");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(Exporter {
                inner: exporter,
                failure: failure.clone(),
            })
            .with_resource(resource)
            .build(),
    ))
}

/// The OTLP exporter, which turns the attributes core records as JSON arrays in text
/// ([`agentic_core::telemetry::STRING_ARRAY_ATTRIBUTES`], e.g.
/// `gen_ai.response.finish_reasons`) into the string arrays the conventions define.
/// Also keeps the first failed export's error: the SDK's shutdown reports only a timeout.
#[derive(Debug)]
struct Exporter {
    inner: opentelemetry_otlp::SpanExporter,
    failure: Failure,
}

/// Why an export failed, if one did.
type Failure = Arc<Mutex<Option<String>>>;

impl SpanExporter for Exporter {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &mut batch {
            for attribute in &mut span.attributes {
                if !agentic_core::telemetry::STRING_ARRAY_ATTRIBUTES
                    .contains(&attribute.key.as_str())
                {
                    continue;
                }
                let opentelemetry::Value::String(text) = &attribute.value else {
                    continue;
                };
                if let Ok(values) = serde_json::from_str::<Vec<String>>(text.as_str()) {
                    attribute.value = opentelemetry::Value::Array(opentelemetry::Array::String(
                        values.into_iter().map(Into::into).collect(),
                    ));
                }
            }
        }
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| error.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// Sends the exporter's requests with reqwest on the process's runtime: the batch exporter
/// runs on a thread of its own, where an async client has no reactor, so each request is a
/// task on the runtime that the exporter's thread waits for.
#[derive(Debug)]
struct TokioHttpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for TokioHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let answer = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        answer.await?
    }
}

/// The text log's fields without `otel.*` (span names and kinds meant for the trace backend,
/// which would only repeat the span's fields on every line).
#[derive(Debug, Clone, Copy)]
struct TextFields;

impl<'writer> FormatFields<'writer> for TextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = TextVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing_core::span::Record<'_>,
    ) -> fmt::Result {
        let mut added = String::new();
        self.format_fields(Writer::new(&mut added), fields)?;
        if !added.is_empty() {
            if !current.fields.is_empty() {
                current.fields.push(' ');
            }
            current.fields.push_str(&added);
        }
        Ok(())
    }
}

struct TextVisitor<'writer> {
    writer: Writer<'writer>,
    first: bool,
    result: fmt::Result,
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &tracing_core::Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &tracing_core::Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if self.result.is_err() || name.starts_with("otel.") {
            return;
        }
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = if name == "message" {
            write!(self.writer, "{separator}{value:?}")
        } else {
            write!(self.writer, "{separator}{name}={value:?}")
        };
    }
}
