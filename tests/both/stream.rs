//! `bench stream` on two ranks, on this tier's launcher, and the small
//! arrays the stream tests of both tiers use.

use crate::common::*;

#[test]
fn stream_on_two_ranks_reports_each_rank_and_the_aggregate() {
    let mut args = vec!["bench", "stream", "--format", "json"];
    args.extend_from_slice(&SMALL);
    for launcher in launchers() {
        let r = json_ok(&run(ranks(launcher, 2, &args)));
        assert_eq!(r["ranks"], 2);
        let per_rank = r["per_rank"].as_array().unwrap();
        assert_eq!(per_rank.len(), 2);
        assert_eq!(per_rank[1]["rank"], 1);
        assert_eq!(per_rank[1]["kernels"].as_array().unwrap().len(), 5);
        assert_eq!(per_rank[1]["sum13_elements"], 3 * 8 * 200003 / 56);
        assert!(r["sum13_gbytes_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// A small, quick stream run: arrays far smaller than the default.
pub(crate) const SMALL: [&str; 6] = ["--elements", "200003", "--repeats", "3", "--threads", "2"];
