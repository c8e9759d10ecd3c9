//! Keeping the daemon's secrets out of its `/proc/PID/environ` and
//! `/proc/PID/cmdline` (spec/security.md): a daemon started with
//! `OPCODE_TOKEN`, `OPCODE_VAULT_KEY`, `OPCODE_SECRET_*` or `--token` in
//! its environment or arguments writes them to a memory file, makes it its
//! standard input, and starts itself again (the same process) without
//! them; the new image reads them back, hands them to
//! [`opcode_stdlib::environment`] and replaces its standard input with
//! `/dev/null`. The kernel keeps a process's first environment for its
//! whole life, so no later change of the variables would do.

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::io::{Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;

use opcode_stdlib::environment;

use opcode_stdlib::environment::ON_STDIN as HANDED_OVER;

/// Under which name the `--token` flag's value is handed over.
pub const TOKEN_FLAG: &str = "--token";

/// The most the memory file may hold.
const MOST: u64 = 16 << 20;

/// Does what the module says, for `opcode serve` (or plain `opcode`).
/// Returns normally when there was nothing to hide, or in the new image;
/// an error stops the daemon.
pub fn secrets_out_of_sight() -> Result<(), String> {
    if std::env::var_os(HANDED_OVER).is_some() {
        return take_back();
    }
    let args: Vec<OsString> = std::env::args_os().collect();
    let command = args.get(1).and_then(|a| a.to_str());
    if !matches!(command, None | Some("serve")) {
        return Ok(());
    }
    let (args, token) = without_token(args);
    let mut secrets: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| environment::is_secret(k))
        .collect();
    if let Some(token) = token {
        secrets.insert(TOKEN_FLAG.into(), token);
    }
    if secrets.is_empty() {
        return Ok(());
    }
    start_again(&args, &secrets)
}

/// `args` without `--token VALUE` / `--token=VALUE`, and the value.
fn without_token(args: Vec<OsString>) -> (Vec<OsString>, Option<String>) {
    let mut kept = Vec::with_capacity(args.len());
    let mut token = None;
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        if arg == "--token" {
            token = iter.next().and_then(|v| v.into_string().ok());
        } else if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("--token=")) {
            token = Some(value.to_owned());
        } else if arg == "--" {
            kept.push(arg);
            kept.extend(iter.by_ref());
        } else {
            kept.push(arg);
        }
    }
    (kept, token)
}

fn start_again(args: &[OsString], secrets: &BTreeMap<String, String>) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        format!("cannot keep the secrets out of the environment ({what}): {e}")
    };
    let memory =
        nix::sys::memfd::memfd_create(c"opcode-secrets", nix::sys::memfd::MFdFlags::empty())
            .map_err(|e| fail("memfd_create", &e))?;
    let mut file = std::fs::File::from(memory);
    let text = serde_json::to_vec(secrets).map_err(|e| fail("encode", &e))?;
    file.write_all(&text).map_err(|e| fail("write", &e))?;
    file.rewind().map_err(|e| fail("rewind", &e))?;
    nix::unistd::dup2_stdin(&file).map_err(|e| fail("dup2", &e))?;
    drop(file);
    let c = |bytes: &[u8]| CString::new(bytes).map_err(|e| fail("argument", &e));
    let arguments = args
        .iter()
        .map(|a| c(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut envp = Vec::new();
    for (key, value) in std::env::vars_os() {
        if key.to_str().is_some_and(environment::is_secret) {
            continue;
        }
        let mut pair = key.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        envp.push(c(&pair)?);
    }
    envp.push(c(format!("{HANDED_OVER}=1").as_bytes())?);
    let error = match nix::unistd::execve(c"/proc/self/exe", &arguments, &envp) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    Err(fail("execve", &error))
}

/// In the new image: reads the secrets from standard input, then puts
/// `/dev/null` there.
fn take_back() -> Result<(), String> {
    let mut text = Vec::new();
    std::io::stdin()
        .lock()
        .take(MOST)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the handed-over secrets: {e}"))?;
    let secrets: BTreeMap<String, String> = serde_json::from_slice(&text)
        .map_err(|e| format!("the handed-over secrets are unreadable: {e}"))?;
    let null =
        std::fs::File::open("/dev/null").map_err(|e| format!("cannot open /dev/null: {e}"))?;
    nix::unistd::dup2_stdin(&null).map_err(|e| format!("cannot replace standard input: {e}"))?;
    environment::hand_over(secrets);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_flag_is_taken_out_of_the_arguments() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        let (kept, token) =
            without_token(args(&["opcode", "serve", "--token", "t1", "--listen", "x"]));
        assert_eq!(
            (kept, token.as_deref()),
            (args(&["opcode", "serve", "--listen", "x"]), Some("t1"))
        );
        let (kept, token) = without_token(args(&["opcode", "--token=t2"]));
        assert_eq!((kept, token.as_deref()), (args(&["opcode"]), Some("t2")));
    }
}
