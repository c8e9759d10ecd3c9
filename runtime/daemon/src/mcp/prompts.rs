//! Prompts (`write-workflow`, `fix-workflow`) and the skills extension
//! (SEP-2640: `skills/list`, `skills/get`) over the agent skill of
//! [`crate::api::skill`]; its files are `skill://opcode/…`
//! resources.

use rmcp::ErrorData;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, GetSkillRequestParams, GetSkillResult,
    ListPromptsResult, ListSkillsResult, Prompt, PromptArgument, PromptMessage, Role, Skill,
    SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::Value;

use crate::api::Api;
use crate::api::skill::{FILES, URI, frontmatter};

/// `prompts/list`.
pub fn list() -> ListPromptsResult {
    ListPromptsResult::with_all_items(vec![
        Prompt::new(
            "write-workflow",
            Some("How to write an opcode workflow: the language, the tools and every action."),
            Some(vec![PromptArgument::new("goal").with_description(
                "What the workflow should do (optional): the prompt then asks for it.",
            )]),
        ),
        Prompt::new(
            "fix-workflow",
            Some("A workflow definition with what the compiler says of it, to repair."),
            Some(vec![
                PromptArgument::new("definition")
                    .with_description("The workflow: JSON (bare or a template) or .opc text.")
                    .with_required(true),
            ]),
        ),
    ])
}

/// `prompts/get`.
pub fn get(api: &Api, request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    let argument = |name: &str| {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
    };
    let (description, text) = match request.name.as_str() {
        "write-workflow" => (
            "Writing an opcode workflow",
            api.write_workflow_prompt(argument("goal")),
        ),
        "fix-workflow" => {
            let definition = argument("definition").ok_or_else(|| {
                ErrorData::invalid_params("fix-workflow needs the argument `definition`", None)
            })?;
            (
                "Repairing an opcode workflow",
                api.fix_workflow_prompt(definition),
            )
        }
        other => {
            return Err(ErrorData::invalid_params(
                format!("there is no prompt `{other}`: use write-workflow or fix-workflow"),
                None,
            ));
        }
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(description),
    )
}

/// The skill as the skills extension describes it: its frontmatter and
/// each file with its digest.
fn skill() -> Skill {
    let (name, description) = frontmatter();
    let files = FILES
        .iter()
        .map(|(path, text)| SkillResource::from_bytes(format!("{URI}{path}"), text.as_bytes()))
        .collect();
    Skill::new(
        format!("{URI}SKILL.md"),
        SkillFrontmatter::new(name, description),
        SkillResources::Files(files),
    )
}

/// `skills/list`.
pub fn skills() -> ListSkillsResult {
    ListSkillsResult::with_all_items(vec![skill()])
}

/// `skills/get`.
pub fn get_skill(request: &GetSkillRequestParams) -> Result<GetSkillResult, ErrorData> {
    let skill = skill();
    if request.uri != skill.uri {
        return Err(ErrorData::invalid_params(
            format!("there is no skill at `{}`: use {}", request.uri, skill.uri),
            None,
        ));
    }
    Ok(GetSkillResult::new(skill))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_lists_its_files_with_their_digests() {
        let listed = serde_json::to_value(skill()).unwrap();
        assert_eq!(listed["uri"], "skill://opcode/SKILL.md");
        assert_eq!(listed["frontmatter"]["name"], "opcode");
        let files = listed["resources"].as_array().unwrap();
        assert_eq!(files.len(), FILES.len());
        assert!(files[0]["digest"].as_str().unwrap().starts_with("sha256:"));
    }
}
