//! Builders for Agent Cards.

use crate::proto::{AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill};

impl AgentCard {
    /// A card with a name, description and version, accepting and producing
    /// `text/plain` by default. Interfaces are added by the server that
    /// serves the card (or with [`AgentCard::with_interface`]).
    ///
    /// ```
    /// use agentwire_types::{AgentCard, AgentSkill};
    /// let card = AgentCard::new("Echo", "Repeats what you say", "1.0.0")
    ///     .with_streaming(true)
    ///     .with_skill(AgentSkill::new("echo", "Echo", "Echoes text", ["echo"]));
    /// assert_eq!(card.skills.len(), 1);
    /// ```
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        version: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            version: version.into(),
            capabilities: Some(AgentCapabilities::default()),
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into()],
            ..Default::default()
        }
    }

    /// Adds a skill.
    pub fn with_skill(mut self, skill: AgentSkill) -> Self {
        self.skills.push(skill);
        self
    }

    /// Declares (or not) streaming support.
    pub fn with_streaming(mut self, on: bool) -> Self {
        self.capabilities
            .get_or_insert_with(Default::default)
            .streaming = Some(on);
        self
    }

    /// Declares (or not) push notification support.
    pub fn with_push_notifications(mut self, on: bool) -> Self {
        self.capabilities
            .get_or_insert_with(Default::default)
            .push_notifications = Some(on);
        self
    }

    /// Sets the accepted input media types.
    pub fn with_input_modes<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        modes: I,
    ) -> Self {
        self.default_input_modes = modes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the produced output media types.
    pub fn with_output_modes<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        modes: I,
    ) -> Self {
        self.default_output_modes = modes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the provider.
    pub fn with_provider(
        mut self,
        organization: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        self.provider = Some(AgentProvider {
            organization: organization.into(),
            url: url.into(),
        });
        self
    }

    /// Appends an interface.
    pub fn with_interface(mut self, url: impl Into<String>, binding: impl Into<String>) -> Self {
        self.supported_interfaces.push(AgentInterface {
            url: url.into(),
            protocol_binding: binding.into(),
            tenant: String::new(),
            protocol_version: crate::PROTOCOL_VERSION.into(),
        });
        self
    }

    /// Whether the card declares streaming.
    pub fn supports_streaming(&self) -> bool {
        self.capabilities
            .as_ref()
            .and_then(|c| c.streaming)
            .unwrap_or(false)
    }

    /// Whether the card declares push notifications.
    pub fn supports_push_notifications(&self) -> bool {
        self.capabilities
            .as_ref()
            .and_then(|c| c.push_notifications)
            .unwrap_or(false)
    }

    /// Whether the card declares an extended card.
    pub fn supports_extended_card(&self) -> bool {
        self.capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false)
    }
}

impl AgentSkill {
    /// A skill with an id, name, description and tags.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        tags: I,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            tags: tags.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// Adds an example prompt.
    pub fn with_example(mut self, example: impl Into<String>) -> Self {
        self.examples.push(example.into());
        self
    }

    /// Sets the skill's input media types.
    pub fn with_input_modes<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        modes: I,
    ) -> Self {
        self.input_modes = modes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the skill's output media types.
    pub fn with_output_modes<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        modes: I,
    ) -> Self {
        self.output_modes = modes.into_iter().map(Into::into).collect();
        self
    }
}
