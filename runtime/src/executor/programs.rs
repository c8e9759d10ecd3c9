//! Compiled programs and action sets, shared by every run that uses them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use opcode_compiler::Compiler;
use opcode_stdlib::cel::CelHost;
use opcode_stdlib::cel::budget::Budget;
use opcode_stdlib::exec::{Actions, ExternalActions, Services};
use opcode_vm::catalog::ActionSpec;
use opcode_vm::{Plan, Program};

use super::{Config, ExecError};

/// A program ready to run: its plan, its compiled expressions, its bytes.
pub struct Loaded {
    /// The plan.
    pub plan: Arc<Plan>,
    /// CEL, compiled once per program.
    pub host: CelHost,
    /// The serialized Program, as stored.
    pub bytes: Vec<u8>,
}

/// The caches.
pub struct Programs {
    compiler: RwLock<Arc<Compiler>>,
    /// Actions besides the built-in ones, by provider (a plugin's tools).
    external: Mutex<BTreeMap<String, Vec<ActionSpec>>>,
    by_definition: Mutex<HashMap<String, Arc<Loaded>>>,
    actions: Mutex<HashMap<PathBuf, Arc<Actions>>>,
    /// What one CEL evaluation may cost.
    budget: Budget,
}

impl Programs {
    /// Empty caches; each CEL evaluation stays within `budget`.
    pub fn new(budget: Budget) -> Programs {
        Programs {
            budget,
            compiler: RwLock::new(Arc::new(
                Compiler::new().with_actions(opcode_stdlib::catalog()),
            )),
            external: Mutex::new(BTreeMap::new()),
            by_definition: Mutex::new(HashMap::new()),
            actions: Mutex::new(HashMap::new()),
        }
    }

    /// The compiler (with the built-in actions and the external ones known now).
    pub fn compiler(&self) -> Arc<Compiler> {
        self.compiler
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sets the actions `provider` offers besides the built-in ones; later
    /// compilations check steps against them.
    pub fn set_external_actions(&self, provider: &str, specs: Vec<ActionSpec>) {
        let mut external = self.external.lock().unwrap_or_else(PoisonError::into_inner);
        external.insert(provider.to_owned(), specs);
        let all = external.values().flatten().cloned();
        let compiler = Compiler::new()
            .with_actions(opcode_stdlib::catalog())
            .with_actions(all);
        *self
            .compiler
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(compiler);
    }

    /// The program of a stored workflow: its stored bytes, or, when they
    /// were written by another format version, its definition recompiled.
    pub fn load(&self, definition: &str, bytes: &[u8]) -> Result<Arc<Loaded>, ExecError> {
        if let Some(found) = self.cached(definition) {
            return Ok(found);
        }
        let program = if let Ok(program) = Program::from_bytes(bytes) {
            program
        } else {
            let (program, diagnostics) = self.compiler().compile(definition, "workflow.json");
            program.ok_or_else(|| {
                let first = diagnostics
                    .iter()
                    .find(|d| d.is_error())
                    .map_or_else(String::new, |d| format!(": {}", d.message));
                ExecError::Program(format!("the stored definition no longer compiles{first}"))
            })?
        };
        Ok(self.insert(definition, program))
    }

    /// Registers a program compiled from `definition` (a definition seen
    /// before keeps its program: the same source compiles the same).
    pub fn insert(&self, definition: &str, program: Program) -> Arc<Loaded> {
        if let Some(found) = self.cached(definition) {
            return found;
        }
        let bytes = program.to_bytes();
        let plan = Plan::new(program);
        let host = CelHost::with_budget(&plan.program, self.budget);
        let loaded = Arc::new(Loaded { plan, host, bytes });
        self.by_definition
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(definition.to_owned(), loaded.clone());
        loaded
    }

    fn cached(&self, definition: &str) -> Option<Arc<Loaded>> {
        self.by_definition
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(definition)
            .cloned()
    }

    /// The actions resolving relative paths against `base_dir`, configured
    /// by `config`.
    pub fn actions(
        &self,
        base_dir: &Path,
        services: &Arc<dyn Services>,
        config: &Config,
        external: Option<&Arc<dyn ExternalActions>>,
    ) -> Arc<Actions> {
        self.actions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(base_dir.to_path_buf())
            .or_insert_with(|| {
                let actions = Actions::new(services.clone(), base_dir.to_path_buf())
                    .with_isolation(config.isolation.clone())
                    .with_limits(config.limits)
                    .with_evaluator(config.isolation.helper.clone())
                    .with_external(external.cloned())
                    .with_agents(config.agents.clone());
                Arc::new(actions)
            })
            .clone()
    }
}
