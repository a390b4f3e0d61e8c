//! Starting the server: configuration, the listener, TLS, connection limits, timeouts and
//! graceful shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capgate::runtime::{InMemoryStore, SystemClock};
use capgate::{Engine, Limits};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::audit::QueuedAudit;
use crate::body::BodyLimits;
use crate::credential::{CredentialError, TokenFile};
use crate::ext_authz::ExtAuthz;
use crate::gateway::Gateway;
use crate::identity::Identities;
use crate::metrics::Metrics;
use crate::reload::{Reloader, load, watch};
use crate::routes::router;
use crate::state::{AppState, Readiness};
use crate::tls;

/// Everything `capgate serve` is started with.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Policy files and directories (watched for changes).
    pub policies: Vec<PathBuf>,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The PEP token file (`POST /v1/check`); required.
    pub pep_token_file: PathBuf,
    /// The operator token file; without it the operator API refuses every call.
    pub operator_token_file: Option<PathBuf>,
    /// The audit log (JSON Lines, appended).
    pub audit: Option<PathBuf>,
    /// The TLS certificate chain and key (PEM), for every listener.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The agents' credentials (`--identities`), for the gateway modes.
    pub identities: Option<PathBuf>,
    /// Where Envoy's gRPC external authorization is served, if anywhere.
    pub grpc_listen: Option<SocketAddr>,
    /// Serve plain HTTP on a non-loopback address.
    pub insecure_plaintext: bool,
    /// Observe mode (SPEC §5.1).
    pub observe: bool,
    /// Watch the policy paths and reload on change.
    pub watch: bool,
    /// The engine's limits.
    pub limits: Limits,
    /// Connection limits and timeouts.
    pub connections: ConnectionLimits,
}

/// Limits on connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// The longest a request's headers may take to arrive (a slowloris connection is cut).
    pub header_timeout: Duration,
    /// The longest a request's body may take to arrive.
    pub body_timeout: Duration,
    /// The longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// How long shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 4096,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A token file is unusable.
    #[error(transparent)]
    Credential(#[from] CredentialError),
    /// The policy did not load.
    #[error("the policy did not load:\n{0}")]
    Policy(#[from] capgate::LoadError),
    /// Plain HTTP on a non-loopback address without `--insecure-plaintext`.
    #[error(
        "{0} is not a loopback address: serve it over TLS (--tls-cert, --tls-key) or pass --insecure-plaintext"
    )]
    Plaintext(SocketAddr),
    /// TLS configuration.
    #[error("TLS: {0}")]
    Tls(String),
    /// The engine's configuration.
    #[error(transparent)]
    Engine(#[from] capgate::EngineError),
    /// Binding, the audit file, threads.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// The policy paths cannot be watched.
    #[error("cannot watch the policy paths: {0}")]
    Watch(#[from] notify::Error),
    /// The identities file.
    #[error(transparent)]
    Identities(#[from] crate::identity::IdentityError),
    /// The gRPC server failed.
    #[error("gRPC: {0}")]
    Grpc(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServeError {
    let what = what.into();
    move |source| ServeError::Io { what, source }
}

/// A server bound to its address, ready to run.
pub struct Server {
    listener: TcpListener,
    grpc: Option<TcpListener>,
    grpc_tls: Option<(PathBuf, PathBuf)>,
    tls: Option<TlsAcceptor>,
    state: AppState,
    connections: ConnectionLimits,
    paths: Vec<PathBuf>,
    watch: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("connections", &self.connections)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads the policy and the credentials and binds the address.
    ///
    /// # Errors
    /// Any [`ServeError`]: the server refuses to start rather than start half-configured.
    pub async fn bind(config: ServeConfig) -> Result<Self, ServeError> {
        if config.tls.is_none() && !config.listen.ip().is_loopback() && !config.insecure_plaintext {
            return Err(ServeError::Plaintext(config.listen));
        }
        let tls = match &config.tls {
            Some((cert, key)) => Some(tls::acceptor(cert, key).map_err(ServeError::Tls)?),
            None => None,
        };
        let pep = Arc::new(TokenFile::open(&config.pep_token_file)?);
        let operator = match &config.operator_token_file {
            Some(path) => Some(Arc::new(TokenFile::open(path)?)),
            None => None,
        };
        let identities = Arc::new(match &config.identities {
            Some(path) => Identities::load(path)?,
            None => Identities::default(),
        });
        let policy = load(&config.policies, config.limits)?;
        let metrics = Arc::new(Metrics::new());
        let audit = match &config.audit {
            Some(path) => Some(
                QueuedAudit::open(path, metrics.audit_failures())
                    .map_err(io(format!("cannot open the audit log {}", path.display())))?,
            ),
            None => None,
        };
        let mut builder = Engine::builder(policy)
            .clock(Arc::new(SystemClock))
            .state(Arc::new(InMemoryStore::new()))
            .limits(config.limits)?
            .observe(config.observe);
        if let Some(audit) = &audit {
            builder = builder.audit(Arc::clone(audit) as Arc<dyn capgate::AuditSink>);
        }
        let engine = Arc::new(builder.build());
        metrics.loaded(&engine.policy());
        let readiness = Arc::new(Readiness::default());
        readiness.loaded();
        let reloader = Reloader::start(
            Arc::clone(&engine),
            config.policies.clone(),
            config.limits,
            Arc::clone(&metrics),
            Arc::clone(&readiness),
        )
        .map_err(io("cannot start the reload thread"))?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(io(format!("cannot listen on {}", config.listen)))?;
        let grpc = match config.grpc_listen {
            Some(address) => Some(
                TcpListener::bind(address)
                    .await
                    .map_err(io(format!("cannot listen on {address}")))?,
            ),
            None => None,
        };
        let state = AppState {
            gateway: Gateway::new(Arc::clone(&engine), Arc::clone(&metrics)),
            engine,
            metrics,
            pep,
            operator,
            readiness,
            reloader,
            body: BodyLimits {
                max_bytes: config.limits.max_request_bytes,
                timeout: config.connections.body_timeout,
            },
            audit,
            identities,
        };
        Ok(Server {
            listener,
            grpc,
            grpc_tls: config.tls.clone(),
            tls,
            state,
            connections: config.connections,
            paths: config.policies,
            watch: config.watch,
        })
    }

    /// The address the server listens on (the port chosen for port 0).
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The address of the gRPC listener, if there is one.
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub fn grpc_addr(&self) -> std::io::Result<Option<SocketAddr>> {
        self.grpc.as_ref().map(TcpListener::local_addr).transpose()
    }

    /// The handlers' shared state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then stops accepting, lets requests in flight finish
    /// (up to the grace period) and writes every queued audit record.
    ///
    /// # Errors
    /// The policy paths cannot be watched.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let _watcher = if self.watch {
            Some(watch(&self.paths, self.state.reloader.clone())?)
        } else {
            None
        };
        let (stop_grpc, grpc_stopped) = tokio::sync::watch::channel(false);
        let grpc = match self.grpc {
            Some(listener) => Some(tokio::spawn(serve_grpc(
                listener,
                self.grpc_tls.clone(),
                self.state.clone(),
                grpc_stopped,
            ))),
            None => None,
        };
        let service = TowerToHyperService::new(router(self.state.clone()));
        let permits = Arc::new(Semaphore::new(self.connections.max_connections));
        let graceful = GracefulShutdown::new();
        let limits = self.connections;
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = Arc::clone(&permits).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            let (stream, _peer) = tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of descriptors, say: wait a little rather than spin on it.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let service = service.clone();
            let tls = self.tls.clone();
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let _permit = permit;
                let builder = {
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder
                        .timer(TokioTimer::new())
                        .header_read_timeout(limits.header_timeout)
                        .keep_alive(true);
                    builder
                };
                match tls {
                    None => {
                        let connection = builder.serve_connection(TokioIo::new(stream), service);
                        let _ = watcher.watch(connection).await;
                    }
                    Some(acceptor) => {
                        let handshake =
                            tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream));
                        if let Ok(Ok(stream)) = handshake.await {
                            let connection =
                                builder.serve_connection(TokioIo::new(stream), service);
                            let _ = watcher.watch(connection).await;
                        }
                    }
                }
            });
        }
        drop(self.listener);
        let _ = stop_grpc.send(true);
        if let Some(grpc) = grpc {
            match tokio::time::timeout(limits.shutdown_grace, grpc).await {
                Ok(Ok(Err(error))) => tracing::error!(%error, "the gRPC server failed"),
                Ok(Err(_)) | Err(_) => tracing::warn!("the gRPC server did not stop in time"),
                Ok(Ok(Ok(()))) => {}
            }
        }
        if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("requests still in flight at the end of the grace period were cut");
        }
        if let Some(audit) = &self.state.audit {
            let audit = Arc::clone(audit);
            let _ = tokio::task::spawn_blocking(move || audit.close()).await;
        }
        Ok(())
    }
}

/// Serves Envoy's external authorization on `listener` until `stop` turns true.
async fn serve_grpc(
    listener: TcpListener,
    tls: Option<(PathBuf, PathBuf)>,
    state: AppState,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), ServeError> {
    let service = ExtAuthz::new(
        state.gateway.clone(),
        Arc::clone(&state.pep),
        Arc::clone(&state.metrics),
    )
    .into_service();
    let mut builder = tonic::transport::Server::builder();
    if let Some((cert, key)) = tls {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| ServeError::Tls(format!("{}: {e}", path.display())))
        };
        let identity = tonic::transport::Identity::from_pem(read(&cert)?, read(&key)?);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(|e| ServeError::Tls(e.to_string()))?;
    }
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    builder
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        })
        .await
        .map_err(|e| ServeError::Grpc(e.to_string()))
}

/// Completes on SIGTERM or SIGINT. On SIGHUP it re-reads the token files and reloads the policy.
pub async fn signals(state: AppState) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                for (name, tokens) in [("PEP", Some(&state.pep)), ("operator", state.operator.as_ref())] {
                    if let Some(tokens) = tokens && let Err(error) = tokens.reread() {
                        tracing::error!(%error, "the {name} token file was not re-read; the old token stays");
                    }
                }
                state.reloader.request();
            }
        }
    }
    tracing::info!("shutting down");
}

/// Runs `capgate serve` to completion on a new runtime.
///
/// # Errors
/// The server could not start.
pub fn run(config: ServeConfig) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("capgate-serve")
        .build()
        .map_err(io("cannot start the runtime"))?;
    runtime.block_on(async {
        let server = Server::bind(config).await?;
        let address = server.local_addr().map_err(io("the listening socket"))?;
        tracing::info!(%address, "serving");
        let shutdown = signals(server.state().clone());
        server.run(shutdown).await
    })
}
