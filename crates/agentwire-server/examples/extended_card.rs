//! An extended agent card for authenticated callers: the public card
//! declares an HTTP Bearer security scheme and
//! `capabilities.extendedAgentCard`; `GetExtendedAgentCard` answers the
//! callers whose token the server's `Authenticator` accepts (here
//! `BearerTokens`, one static token; anonymous callers may still use the
//! agent) with a card that lists one more skill.
//!
//! The token is `A2A_TOKEN` from the environment, or a random one printed
//! at start.
//!
//! ```sh
//! A2A_TOKEN=s3cret cargo run -p agentwire-server --example extended_card           # 127.0.0.1:8080
//! A2A_TOKEN=s3cret cargo run -p agentwire-server --example extended_card -- 9000   # another port
//! a2a card get -a 127.0.0.1:8080 --extended --bearer s3cret
//! ```

use std::sync::Arc;

use agentwire_server::{A2aServer, AgentExecutor, BearerTokens, RequestContext, TaskUpdater};
use agentwire_types::{
    A2aResult, AgentCard, AgentSkill, HttpAuthSecurityScheme, SecurityScheme, new_id,
    security_scheme,
};

/// Greets; members (authenticated callers) get a warmer greeting.
pub struct Greeter;

impl AgentExecutor for Greeter {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        match &ctx.caller {
            Some(member) => task.reply_text(format!("Welcome back, {member}!")).await,
            None => task.reply_text("Hello!").await,
        }
    }
}

/// The public card and the extended one.
pub fn cards() -> (AgentCard, AgentCard) {
    let mut public = AgentCard::new("Greeter", "Says hello", "1.0.0").with_skill(AgentSkill::new(
        "hello",
        "Hello",
        "A greeting",
        ["greeting"],
    ));
    // How to authenticate: a bearer token in `Authorization`. No security
    // requirement: anonymous callers may use the agent too.
    public.security_schemes.insert(
        "bearer".into(),
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::HttpAuthSecurityScheme(
                HttpAuthSecurityScheme {
                    scheme: "Bearer".into(),
                    description: "The token the agent's operator gave you".into(),
                    ..Default::default()
                },
            )),
        },
    );
    let mut extended = public.clone().with_skill(AgentSkill::new(
        "members",
        "Members' greeting",
        "A greeting by name, for authenticated callers",
        ["greeting", "members"],
    ));
    extended.description = "Says hello; greets members by name".into();
    (public, extended)
}

/// The agent, accepting `token` as the principal `member`.
pub fn server(token: &str) -> A2aServer {
    let (public, extended) = cards();
    let mut tokens = BearerTokens::new().with_token(token, "member");
    tokens.allow_anonymous = true;
    A2aServer::new(public, Greeter)
        .authenticator(Arc::new(tokens))
        .extended_card(extended)
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    let token = match std::env::var("A2A_TOKEN") {
        Ok(token) if !token.is_empty() => token,
        _ => {
            let token = new_id();
            println!("Bearer token (set A2A_TOKEN to choose it): {token}");
            token
        }
    };
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server(&token).bind_local(8080).await?;
    println!("Greeter agent on {} (Ctrl-C stops it)", bound.base_url());
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
