//! An incremental parser for `text/event-stream` (the subset Sluice sends:
//! `id`, `event`, `data`, comments), fed with whatever chunks arrive.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    /// `message` when the server named none.
    pub event: String,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    events.push(SseEvent {
                        id: self.id.take(),
                        event: self.event.take().unwrap_or_else(|| "message".into()),
                        data,
                    });
                }
                self.id = None;
                self.event = None;
                continue;
            }
            if line.starts_with(':') {
                continue; // comment / keep-alive
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (&*line, ""),
            };
            match field {
                "id" => self.id = Some(value.to_string()),
                "event" => self.event = Some(value.to_string()),
                "data" => match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                },
                _ => {}
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_comments_and_multiline_data() {
        let mut p = SseParser::new();
        assert!(p.push(b": keep-alive\n\nid: 4").is_empty());
        assert!(p.push(b"1\nevent: record\r\ndata: {\"a\":").is_empty());
        let evs = p.push(b"1}\n\ndata: x\ndata:y\n\n");
        assert_eq!(
            evs,
            vec![
                SseEvent {
                    id: Some("41".into()),
                    event: "record".into(),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    id: None,
                    event: "message".into(),
                    data: "x\ny".into()
                },
            ]
        );
    }
}
