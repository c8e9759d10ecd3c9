//! A small builder for action signatures, so each family reads as a table.

use opcode_vm::catalog::{ActionSpec, ParamSpec, Placement, Ty};

/// Starts a signature.
pub fn action(name: &str, doc: &str) -> Builder {
    Builder {
        spec: ActionSpec {
            name: name.to_owned(),
            doc: doc.to_owned(),
            params: Vec::new(),
            open_params: false,
            output: Ty::Any,
            placement: Placement::Dispatched,
            reads_only: false,
        },
    }
}

/// An action signature under construction.
pub struct Builder {
    spec: ActionSpec,
}

impl Builder {
    /// A required parameter.
    pub fn req(mut self, name: &str, ty: Ty, doc: &str) -> Builder {
        self.spec.params.push(ParamSpec {
            name: name.to_owned(),
            ty,
            required: true,
            doc: doc.to_owned(),
        });
        self
    }

    /// An optional parameter.
    pub fn opt(mut self, name: &str, ty: Ty, doc: &str) -> Builder {
        self.spec.params.push(ParamSpec {
            name: name.to_owned(),
            ty,
            required: false,
            doc: doc.to_owned(),
        });
        self
    }

    /// Accepts parameters it does not declare.
    pub fn open(mut self) -> Builder {
        self.spec.open_params = true;
        self
    }

    /// Its calls may run inside the round that asked for them.
    pub fn in_round(mut self) -> Builder {
        self.spec.placement = Placement::InRound;
        self
    }

    /// Its calls may run inside the round when they read the calling run.
    pub fn in_round_for_own_run(mut self) -> Builder {
        self.spec.placement = Placement::InRoundForOwnRun;
        self
    }

    /// Its calls may run inside the round when they evaluate CEL.
    pub fn in_round_for_cel(mut self) -> Builder {
        self.spec.placement = Placement::InRoundForCel;
        self
    }

    /// Its calls only read: they change nothing outside the process.
    pub fn reads_only(mut self) -> Builder {
        self.spec.reads_only = true;
        self
    }

    /// Sets the output shape and finishes.
    pub fn output(mut self, output: Ty) -> ActionSpec {
        self.spec.output = output;
        self.spec
    }
}
