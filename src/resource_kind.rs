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

    /// The operations a capability on this kind may name, and which of them are reads (SPEC
    /// §2.2, the verbs in bold). `None` for `oauth`, whose operations are scopes: any identifier.
    pub fn verbs(self) -> Option<(&'static [&'static str], &'static [&'static str])> {
        match self {
            ResourceKind::Http => Some((
                &[
                    "GET", "HEAD", "OPTIONS", "LIST", "POST", "PUT", "PATCH", "DELETE",
                ],
                &["GET", "HEAD", "OPTIONS", "LIST"],
            )),
            ResourceKind::Db => Some((&["SELECT", "INSERT", "UPDATE", "DELETE"], &["SELECT"])),
            ResourceKind::Oauth => None,
            ResourceKind::Tool => Some((&["call"], &[])),
            ResourceKind::Service => Some((&["use"], &[])),
            ResourceKind::Secret => Some((&["read"], &[])),
        }
    }

    /// True when `verb` is a read verb of this kind. Everything else — including every oauth
    /// scope, `call`, `use` and `read` of a secret — counts as a write for the justification
    /// rule: reviewers should read why a skill needs it.
    pub fn is_read_verb(self, verb: &str) -> bool {
        self.verbs().is_some_and(|(_, reads)| reads.contains(&verb))
    }
}
