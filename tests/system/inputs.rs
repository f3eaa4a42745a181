//! Paths and labels that are not UTF-8, under a real `mpirun`: every rank
//! reads them, and rank 0 appends the record to the same file (the runs of
//! one rank and the tools are `tests/it/inputs.rs`).

use crate::common::hostile::a_run_with_a_label_and_results_file_not_utf8;
use crate::common::*;
use std::path::Path;

#[test]
fn paths_and_labels_need_not_be_utf8_under_mpirun() {
    if !mpi_or_skip("paths_and_labels_need_not_be_utf8_under_mpirun") {
        return;
    }
    let dir = scratch("not-utf8");
    let (file, args) = a_run_with_a_label_and_results_file_not_utf8(&dir);
    let mut cmd = mpirun(2, &[]);
    cmd.args(&args);
    json_ok(&run(cmd));
    assert_eq!(records(Path::new(&file)).len(), 2);
}
