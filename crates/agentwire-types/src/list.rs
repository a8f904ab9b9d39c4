//! Hand-written serde for `ListTasksResponse`: ProtoJSON would omit empty
//! fields, but spec 3.1.4 requires `nextPageToken` to be present (empty on
//! the last page), and `pageSize` and `totalSize` are required.

use serde::ser::SerializeStruct;

use crate::proto::{ListTasksResponse, Task};

impl serde::Serialize for ListTasksResponse {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ListTasksResponse", 4)?;
        s.serialize_field("tasks", &self.tasks)?;
        s.serialize_field("nextPageToken", &self.next_page_token)?;
        s.serialize_field("pageSize", &self.page_size)?;
        s.serialize_field("totalSize", &self.total_size)?;
        s.end()
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default)]
    tasks: Option<Vec<Task>>,
    #[serde(default, alias = "next_page_token")]
    next_page_token: Option<String>,
    #[serde(default, alias = "page_size")]
    page_size: Option<i32>,
    #[serde(default, alias = "total_size")]
    total_size: Option<i32>,
}

impl<'de> serde::Deserialize<'de> for ListTasksResponse {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(deserializer)?;
        Ok(ListTasksResponse {
            tasks: w.tasks.unwrap_or_default(),
            next_page_token: w.next_page_token.unwrap_or_default(),
            page_size: w.page_size.unwrap_or_default(),
            total_size: w.total_size.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_page_token_always_present() {
        let r = ListTasksResponse::default();
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
        );
        let back: ListTasksResponse =
            serde_json::from_str(r#"{"tasks":[],"next_page_token":"x","pageSize":3,"unknown":1}"#)
                .unwrap();
        assert_eq!(back.next_page_token, "x");
        assert_eq!(back.page_size, 3);
    }
}
