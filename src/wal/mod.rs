pub mod segment;
