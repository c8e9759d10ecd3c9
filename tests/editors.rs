//! The editor setup stays true: the VS Code extension's manifest is valid,
//! names files that exist, and carries the current workflow schema.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code may panic

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_vscode_extension_is_complete_and_current() {
    let ext = root().join("editors/vscode");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ext.join("package.json")).unwrap()).unwrap();
    let contributes = &manifest["contributes"];
    let mut files = vec![manifest["main"].as_str().unwrap().to_owned()];
    files.push(
        contributes["languages"][0]["configuration"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    files.push(
        contributes["grammars"][0]["path"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    files.push(
        contributes["jsonValidation"][0]["url"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    for file in &files {
        assert!(ext.join(file).is_file(), "{file} is missing");
    }
    for json in &files[1..] {
        let text = std::fs::read_to_string(ext.join(json)).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{json}: {e}"));
    }
    assert_eq!(contributes["languages"][0]["extensions"][0], ".opc");
    assert_eq!(
        std::fs::read_to_string(ext.join("schema/workflow.schema.json")).unwrap(),
        std::fs::read_to_string(root().join("spec/workflow.schema.json")).unwrap(),
        "copy spec/workflow.schema.json to editors/vscode/schema/"
    );
    let script = std::fs::read_to_string(ext.join("extension.js")).unwrap();
    assert!(
        script.contains("args: [\"lsp\"]"),
        "the extension starts `opcodec lsp`"
    );
}
