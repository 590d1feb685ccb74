pub mod batch;
pub mod dataobj;
