//! What the nodes say: `CLUSTER NODES` lines and `CLUSTER INFO` fields.

use super::*;

/// One line of `CLUSTER NODES`, reduced to what the harness needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct NodeLine {
    pub(super) id: String,
    pub(super) port: u16,
    pub(super) primary: bool,
    /// For replicas: the id of their primary.
    pub(super) primary_id: Option<String>,
    /// Owned slot ranges, inclusive.
    pub(super) slots: Vec<(u16, u16)>,
    /// Flagged `fail` or `fail?` by the reporting node.
    pub(super) failing: bool,
}

pub(super) fn parse_cluster_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    let mut lines = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("unexpected CLUSTER NODES line {line:?}");
        if fields.len() < 8 {
            return Err(bad());
        }
        let addr = fields[1].split(['@', ',']).next().unwrap_or_default();
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(bad)?;
        let flags: Vec<&str> = fields[2].split(',').collect();
        let mut slots = Vec::new();
        for s in &fields[8..] {
            if s.starts_with('[') {
                continue; // importing / migrating marker
            }
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            slots.push((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?));
        }
        lines.push(NodeLine {
            id: fields[0].to_owned(),
            port,
            primary: flags.contains(&"master"),
            primary_id: (fields[3] != "-").then(|| fields[3].to_owned()),
            slots,
            failing: flags.iter().any(|f| *f == "fail" || *f == "fail?"),
        });
    }
    lines.sort();
    Ok(lines)
}

pub(super) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

pub(super) fn cluster_nodes(node: &RedisServer) -> io::Result<Vec<NodeLine>> {
    let text = node
        .conn(Duration::from_secs(1))
        .and_then(|mut c| c.text(&["CLUSTER", "NODES"]))?;
    parse_cluster_nodes(&text).map_err(io::Error::other)
}

pub(super) fn cluster_info(node: &RedisServer) -> io::Result<String> {
    node.conn(Duration::from_secs(1))
        .and_then(|mut c| c.text(&["CLUSTER", "INFO"]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes_output() {
        let text = "\
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001,host myself,master - 0 0 1 connected 0-5460 [5461->-abc]
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002 master,fail? - 0 1426238316232 2 connected 5461 5462-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317741 1 connected
";
        let view = parse_cluster_nodes(text).unwrap();
        assert_eq!(view.len(), 3);
        let first = view.iter().find(|l| l.port == 30001).unwrap();
        assert!(first.primary && !first.failing);
        assert_eq!(first.slots, vec![(0, 5460)]);
        let second = view.iter().find(|l| l.port == 30002).unwrap();
        assert!(second.failing);
        assert_eq!(second.slots, vec![(5461, 5461), (5462, 10922)]);
        let replica = view.iter().find(|l| l.port == 30004).unwrap();
        assert!(!replica.primary);
        assert_eq!(
            replica.primary_id.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert!(parse_cluster_nodes("garbage").is_err());
    }

    #[test]
    fn reads_info_fields() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_assigned"), Some("16384"));
        assert_eq!(info_field(info, "cluster_slots"), None);
    }
}
