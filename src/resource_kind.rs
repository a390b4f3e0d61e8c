//! The resource kinds of SPEC §2.2, below both the syntax tree that names them and the bytecode
//! that matches them.

/// The resource kinds of SPEC §2.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// `https://host[:port]/path`.
    Http,
    /// `db:crm/acme/records`.
    Db,
    /// `oauth:calendar/acme`.
    Oauth,
    /// `tool:read_text_file`.
    Tool,
    /// `service:outboundGateway`.
    Service,
    /// `secret:NYLAS_API_KEY`.
    Secret,
}

impl ResourceKind {
    /// Every kind with its keyword.
    pub const ALL: [(ResourceKind, &'static str); 6] = [
        (ResourceKind::Http, "http"),
        (ResourceKind::Db, "db"),
        (ResourceKind::Oauth, "oauth"),
        (ResourceKind::Tool, "tool"),
        (ResourceKind::Service, "service"),
        (ResourceKind::Secret, "secret"),
    ];

    /// The kind spelled `word`, if any.
    pub fn from_name(word: &str) -> Option<ResourceKind> {
        Self::ALL
            .into_iter()
            .find(|(_, name)| *name == word)
            .map(|(kind, _)| kind)
    }

    /// The keyword for this kind.
    pub fn name(self) -> &'static str {
        Self::ALL
            .into_iter()
            .find(|(kind, _)| *kind == self)
            .map_or("http", |(_, name)| name)
    }
}
