//! Which RBAC refusals in a program's log are defects: every one, except those written while
//! the apiserver's RBAC was still warming up after a restart, when it refuses every request
//! (the upstream COSI sidecar logs those as it retries, and our driver rides them out).

use std::ops::Range;

/// The lines of `log` that tell of a request refused by RBAC ("forbidden") and start outside
/// every byte range of `warm_ups` (the parts of the log written while RBAC was warming up).
pub fn rbac_refusals<'a>(log: &'a str, warm_ups: &[Range<usize>]) -> Vec<&'a str> {
    let mut refusals = Vec::new();
    let mut start = 0;
    for line in log.split_inclusive('\n') {
        let warming = warm_ups.iter().any(|w| w.contains(&start));
        if line.contains("forbidden") && !warming {
            refusals.push(line.trim_end());
        }
        start += line.len();
    }
    refusals
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED: &str = "E1128 reflector.go:158] buckets is forbidden: User \"sa\" cannot list\n";

    /// A log: `before` lines, the apiserver restart, `during` lines while RBAC warms up, then
    /// `after` lines; answers it and the warm-up's byte range.
    fn log(before: &str, during: &str, after: &str) -> (String, Range<usize>) {
        let warm_up = before.len()..before.len() + during.len();
        (format!("{before}{during}{after}"), warm_up)
    }

    #[test]
    fn a_refusal_while_rbac_warms_up_is_tolerated() {
        let (text, warm_up) = log("I started\n", REFUSED, "I synced\n");
        assert_eq!(rbac_refusals(&text, &[warm_up]), Vec::<&str>::new());
    }

    #[test]
    fn a_refusal_once_rbac_is_up_again_is_a_defect() {
        let (text, warm_up) = log("I started\n", REFUSED, REFUSED);
        assert_eq!(rbac_refusals(&text, &[warm_up]), [REFUSED.trim_end()]);
    }

    #[test]
    fn a_refusal_before_the_restart_is_a_defect() {
        let (text, warm_up) = log(REFUSED, "I reconnecting\n", "I synced\n");
        assert_eq!(rbac_refusals(&text, &[warm_up]), [REFUSED.trim_end()]);
    }

    #[test]
    fn without_a_restart_every_refusal_is_a_defect() {
        let text = format!("I started\n{REFUSED}I synced\n{REFUSED}");
        assert_eq!(rbac_refusals(&text, &[]).len(), 2);
        assert_eq!(rbac_refusals("I started\nI synced\n", &[]), Vec::<&str>::new());
    }
}
