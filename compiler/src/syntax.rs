//! Surface syntax: the JSON reader, the interpolation grammar, and the
//! lowering of both into the AST.

pub mod json;
pub mod lower;
pub mod node;
pub mod opc;
pub mod template;
