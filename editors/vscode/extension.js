// Starts `opcodec lsp` for .opc files and JSON documents; the server itself
// decides which JSON documents are workflows (top-level `steps`, or a
// wrapper's `definition`) and leaves the others alone.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("opcode").get("serverPath") || "opcodec";
  client = new LanguageClient(
    "opcode",
    "opcode workflows",
    { command, args: ["lsp"] },
    {
      documentSelector: [
        { scheme: "file", language: "opc" },
        { scheme: "file", language: "json" },
      ],
    },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
