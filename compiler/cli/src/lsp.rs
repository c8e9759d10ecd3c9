//! `opcodec lsp`: a language server over stdio for `.opc` files and
//! workflow JSON (any JSON document whose top level has `steps`, or a
//! wrapper's `definition`, whatever its name). Diagnostics on open and on
//! every change, fixes as code actions, hover, completion, definitions and
//! references of step ids, document symbols, formatting.

mod document;
mod features;
mod position;

use std::collections::HashMap;
use std::sync::Mutex;

use opcode_compiler::Compiler;
use tower_lsp_server::jsonrpc::Result;
use tower_lsp_server::ls_types::{
    CodeActionParams, CodeActionProviderCapability, CodeActionResponse, CompletionOptions,
    CompletionParams, CompletionResponse, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DocumentFormattingParams, DocumentSymbolParams,
    DocumentSymbolResponse, GotoDefinitionParams, GotoDefinitionResponse, Hover, HoverParams,
    HoverProviderCapability, InitializeParams, InitializeResult, Location, OneOf,
    PositionEncodingKind, ReferenceParams, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, TextEdit, Uri,
};
use tower_lsp_server::{Client, LanguageServer, LspService, Server};

use self::document::Document;

/// Arguments of `lsp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Accepted for editors that pass it; stdio is the only transport.
    #[arg(long)]
    stdio: bool,
}

/// Runs the server on stdin/stdout until the client exits.
pub fn run(_args: &Args) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 2;
        }
    };
    runtime.block_on(async {
        let (service, socket) = LspService::new(|client| Backend {
            client,
            compiler: crate::check::compiler(),
            documents: Mutex::new(HashMap::new()),
        });
        Server::new(tokio::io::stdin(), tokio::io::stdout(), socket)
            .serve(service)
            .await;
    });
    0
}

struct Backend {
    client: Client,
    compiler: Compiler,
    documents: Mutex<HashMap<String, Document>>,
}

impl Backend {
    /// Stores a new text for `uri` and publishes its diagnostics.
    async fn update(&self, uri: Uri, text: String, version: Option<i32>) {
        let file = uri.to_file_path();
        let mut document = Document::new(uri.as_str(), file.as_deref(), text, &self.compiler);
        let diagnostics = features::diagnostics(&document);
        {
            let mut documents = self
                .documents
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(old) = documents.remove(uri.as_str()) {
                // While the text does not parse (mid-typing), navigate by
                // the last index that did.
                document.keep_index_of(old);
            }
            documents.insert(uri.as_str().to_owned(), document);
        }
        self.client
            .publish_diagnostics(uri, diagnostics, version)
            .await;
    }

    fn with<R>(&self, uri: &Uri, f: impl FnOnce(&Document) -> R) -> Option<R> {
        let documents = self
            .documents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        documents.get(uri.as_str()).map(f)
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, _: InitializeParams) -> Result<InitializeResult> {
        Ok(InitializeResult {
            server_info: Some(ServerInfo {
                name: "opcodec".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            capabilities: ServerCapabilities {
                position_encoding: Some(PositionEncodingKind::UTF16),
                text_document_sync: Some(TextDocumentSyncCapability::Kind(
                    TextDocumentSyncKind::FULL,
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec![".".into(), "\"".into(), " ".into(), "{".into()]),
                    ..CompletionOptions::default()
                }),
                definition_provider: Some(OneOf::Left(true)),
                references_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                document_formatting_provider: Some(OneOf::Left(true)),
                code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
                ..ServerCapabilities::default()
            },
            ..InitializeResult::default()
        })
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        self.update(doc.uri, doc.text, Some(doc.version)).await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        // Full sync: the last change holds the whole text.
        if let Some(change) = params.content_changes.into_iter().last() {
            let doc = params.text_document;
            self.update(doc.uri, change.text, Some(doc.version)).await;
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        self.documents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uri.as_str());
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let at = params.text_document_position_params;
        Ok(self
            .with(&at.text_document.uri, |doc| {
                features::hover(doc, &self.compiler, at.position)
            })
            .flatten())
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let at = params.text_document_position;
        Ok(self
            .with(&at.text_document.uri, |doc| {
                features::completion(doc, &self.compiler, at.position)
            })
            .filter(|items| !items.is_empty())
            .map(CompletionResponse::Array))
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let at = params.text_document_position_params;
        let uri = at.text_document.uri;
        Ok(self
            .with(&uri, |doc| features::definition(doc, &uri, at.position))
            .flatten()
            .map(GotoDefinitionResponse::Scalar))
    }

    async fn references(&self, params: ReferenceParams) -> Result<Option<Vec<Location>>> {
        let at = params.text_document_position;
        let uri = at.text_document.uri;
        let declaration = params.context.include_declaration;
        Ok(self.with(&uri, |doc| {
            features::references(doc, &uri, at.position, declaration)
        }))
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        Ok(self
            .with(&params.text_document.uri, features::symbols)
            .map(DocumentSymbolResponse::Nested))
    }

    async fn formatting(&self, params: DocumentFormattingParams) -> Result<Option<Vec<TextEdit>>> {
        Ok(self
            .with(&params.text_document.uri, features::formatting)
            .flatten())
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        Ok(self.with(&uri, |doc| features::code_actions(doc, &uri, params.range)))
    }
}
