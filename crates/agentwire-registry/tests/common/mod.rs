//! Shared helpers of the registry's tests: a registry of the labelled
//! routing cards, publishing a card by value, and routing a request.

#![allow(dead_code)]

use std::sync::Arc;

use agentwire_client::registry::{PublishRequest, PublishResponse, RouteRequest, RouteResponse};
use agentwire_registry::store::MemoryRegistryStore;
use agentwire_registry::{Embedder, Registry};
use serde_json::Value;

/// The labelled cards of the routing set.
pub const CARDS: &str = include_str!("../data/routing-cards.json");

/// A memory registry with every card of [`CARDS`] published, routing with
/// `embedder` when one is given.
pub async fn registry(embedder: Option<Arc<dyn Embedder>>) -> Registry {
    let mut b = Registry::builder(Arc::new(MemoryRegistryStore::new()));
    if let Some(e) = embedder {
        b = b.embedder(e);
    }
    let r = b.build().await.unwrap();
    let cards: Vec<Value> = serde_json::from_str(CARDS).unwrap();
    for c in cards {
        publish(&r, c).await;
    }
    r
}

/// Publishes `card` by value, as the publisher "test".
pub async fn publish(r: &Registry, card: Value) -> PublishResponse {
    r.publish(
        "test",
        PublishRequest {
            card: Some(card),
            ..Default::default()
        },
        None,
    )
    .await
    .unwrap()
}

/// Routes `text`, the best three.
pub fn route(r: &Registry, text: &str) -> RouteResponse {
    r.route(&RouteRequest {
        text: text.into(),
        filter: None,
        limit: Some(3),
    })
    .unwrap()
}
