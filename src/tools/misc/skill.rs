//! `skill`: loads a skill's instructions (`<dir>/<skill>/SKILL.md`) from the configured skill
//! directories.
//!
//! Owns finding skills (scanned once at registration for the description, again at each call
//! so the file read is current), the name rule (a plain folder name, never a path), and the
//! containment check: a `SKILL.md` reached through a symlink that leaves its skill directory
//! is refused, since those directories may sit where an agent can write. YAML front matter is
//! parsed only for `name`/`description` and left out of what the model reads. The first
//! directory listing a name wins.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::string_field;
use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, SessionView, Tool,
    ToolContext, ToolError, ToolOutput, ToolSpec,
};

const SKILL_FILE: &str = "SKILL.md";
const MAX_SKILL_BYTES: u64 = 1024 * 1024;
const MAX_NAME_CHARS: usize = 100;
/// Skills listed in the description, and how much of each one's description is shown.
const LISTED_SKILLS: usize = 100;
const LISTED_DESCRIPTION_CHARS: usize = 250;

/// A skill found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SkillEntry {
    name: String,
    description: String,
    /// The canonical path of its `SKILL.md`.
    file: PathBuf,
}

/// A skill as clients outside the model see it (the MCP door lists skills as prompts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillSummary {
    pub name: String,
    /// From its front matter; empty without one.
    pub description: String,
}

/// The skills the `skill` tool would find in `directories` now, sorted by name, the first
/// directory listing a name winning (blocking: it reads each `SKILL.md`'s front matter).
pub fn skill_catalog(directories: &[PathBuf]) -> Vec<SkillSummary> {
    scan(directories)
        .into_iter()
        .map(|skill| SkillSummary {
            name: skill.name,
            description: skill.description,
        })
        .collect()
}

/// The `skill` tool.
pub struct SkillTool {
    spec: ToolSpec,
    directories: Vec<PathBuf>,
    /// Offered only when skills existed at registration (the description lists them).
    found_at_registration: bool,
}

impl SkillTool {
    /// Scans `directories` (blocking, once, at start-up) to list the skills in the description.
    pub fn new(directories: &[PathBuf]) -> Result<SkillTool, BuildError> {
        let skills = scan(directories);
        let spec = ToolSpec::builder("skill")
            .description(description(&skills))
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "skill": {
                        "type": "string",
                        "description": "The skill's name, as listed in this tool's description",
                        "minLength": 1,
                        "maxLength": MAX_NAME_CHARS
                    },
                    "args": {
                        "type": "string",
                        "description": "Optional arguments for the skill, appended to its instructions",
                        "maxLength": 10000
                    }
                },
                "required": ["skill"],
                "additionalProperties": false
            }))
            .read_only(true)
            .concurrency_safe(true)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::ReadOnly)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .idempotent(true)
            .open_world(false)
            .max_result_size_chars(Some(100_000))
            .build()?;
        Ok(SkillTool {
            spec,
            directories: directories.to_vec(),
            found_at_registration: !skills.is_empty(),
        })
    }
}

fn description(skills: &[SkillEntry]) -> String {
    let mut text = String::from(
        "Loads a skill: instructions, written for you, for doing a particular kind of task \
         well. When a task matches one of the skills below, load it before starting and \
         follow what it says; pass anything the skill should know as `args`. Available \
         skills:",
    );
    for skill in skills.iter().take(LISTED_SKILLS) {
        let (summary, cut) = super::cut_chars(&skill.description, LISTED_DESCRIPTION_CHARS);
        text.push_str(&format!(
            "\n- {}{}{summary}{}",
            skill.name,
            if summary.is_empty() { "" } else { ": " },
            if cut { "…" } else { "" }
        ));
    }
    if skills.len() > LISTED_SKILLS {
        text.push_str(&format!("\n(and {} more)", skills.len() - LISTED_SKILLS));
    }
    if skills.is_empty() {
        text.push_str(" none.");
    }
    text
}

/// Whether `name` is a plain folder name: no separators, no `..`, not hidden.
fn is_valid_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The canonical `SKILL.md` of `name` in `dir`, if there is one; an error when it exists but
/// resolves outside `dir` or is not a regular file.
fn locate(dir: &Path, name: &str) -> Result<Option<PathBuf>, String> {
    let candidate = dir.join(name).join(SKILL_FILE);
    let real = match std::fs::canonicalize(&candidate) {
        Ok(real) => real,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(err) => return Err(format!("cannot resolve {}: {err}", candidate.display())),
    };
    let root = std::fs::canonicalize(dir)
        .map_err(|err| format!("cannot resolve {}: {err}", dir.display()))?;
    if !real.starts_with(&root) {
        return Err(format!(
            "skill \"{name}\" resolves to {}, outside its skill directory {}",
            real.display(),
            root.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("{} is not a regular file", candidate.display()));
    }
    Ok(Some(real))
}

/// Every valid skill in `directories`, sorted by name, the first directory winning.
fn scan(directories: &[PathBuf]) -> Vec<SkillEntry> {
    let mut skills: Vec<SkillEntry> = Vec::new();
    for dir in directories {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !is_valid_skill_name(&name) || skills.iter().any(|s| s.name == name) {
                continue;
            }
            let Ok(Some(file)) = locate(dir, &name) else {
                continue;
            };
            let description = read_skill(&file)
                .ok()
                .and_then(|text| front_matter_field(&text, "description"))
                .unwrap_or_default();
            skills.push(SkillEntry {
                name,
                description,
                file,
            });
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

fn read_skill(file: &Path) -> Result<String, String> {
    let size = std::fs::metadata(file)
        .map_err(|err| format!("cannot read {}: {err}", file.display()))?
        .len();
    if size > MAX_SKILL_BYTES {
        return Err(format!(
            "{} is {size} bytes; skills are at most {MAX_SKILL_BYTES}",
            file.display()
        ));
    }
    let bytes =
        std::fs::read(file).map_err(|err| format!("cannot read {}: {err}", file.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not valid UTF-8", file.display()))
}

/// The front matter (between a leading `---` line and the next `---` line) and the body.
fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return (Some(&rest[..offset]), &rest[offset + line.len()..]);
        }
        offset += line.len();
    }
    (None, text)
}

/// A `key: value` line of the front matter, unquoted.
fn front_matter_field(text: &str, key: &str) -> Option<String> {
    let (front, _) = split_front_matter(text);
    front?.lines().find_map(|line| {
        let value = line
            .strip_prefix(key)?
            .trim_start()
            .strip_prefix(':')?
            .trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        Some(unquoted.to_owned())
    })
}

/// Finds and reads skill `name` (blocking).
fn load(directories: &[PathBuf], name: &str) -> Result<(PathBuf, String), ToolError> {
    for dir in directories {
        if let Some(file) = locate(dir, name).map_err(ToolError::Execution)? {
            let text = read_skill(&file).map_err(ToolError::Execution)?;
            return Ok((file, text));
        }
    }
    let available: Vec<String> = scan(directories).into_iter().map(|s| s.name).collect();
    Err(ToolError::Validation(format!(
        "unknown skill \"{name}\"; available skills: {}",
        if available.is_empty() {
            "none".to_owned()
        } else {
            available.join(", ")
        }
    )))
}

fn skill_name(input: &Value) -> Result<&str, ToolError> {
    let name = string_field(input, "skill")?;
    if is_valid_skill_name(name) {
        Ok(name)
    } else {
        Err(ToolError::Validation(format!(
            "skill \"{name}\" is not a skill name: give the name of a skill folder (letters, digits, '-', '_', '.', no '/' or '..')"
        )))
    }
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn is_enabled(&self, _session: &dyn SessionView) -> bool {
        self.found_at_registration
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        skill_name(input).map(drop)
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = skill_name(&input)?.to_owned();
        let args = input.get("args").and_then(Value::as_str).map(str::trim);
        let directories = self.directories.clone();
        let lookup = name.clone();
        let (file, text) = tokio::task::spawn_blocking(move || load(&directories, &lookup))
            .await
            .map_err(|err| ToolError::Execution(format!("loading the skill failed: {err}")))??;
        let description = front_matter_field(&text, "description");
        let (_, body) = split_front_matter(&text);
        let base = file.parent().unwrap_or(&file);
        let mut out = format!(
            "Skill \"{name}\"\nBase directory for this skill: {}\n\n{}",
            base.display(),
            body.trim()
        );
        if let Some(args) = args.filter(|a| !a.is_empty()) {
            out.push_str(&format!("\n\nARGUMENTS: {args}"));
        }
        Ok(ToolOutput::text(out)
            .with_metadata("path", json!(file.display().to_string()))
            .with_structured(json!({
                "skill": name,
                "description": description,
                "path": file.display().to_string(),
            })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_folder_names() {
        for good in ["pdf", "code-review", "my_skill", "v1.2", "Ünïcode"] {
            assert!(is_valid_skill_name(good), "{good}");
        }
        for bad in [
            "", ".", "..", "../etc", "a/b", "a\\b", "/abs", ".hidden", "a..b", "nul\0",
        ] {
            assert!(!is_valid_skill_name(bad), "{bad:?}");
        }
        assert!(!is_valid_skill_name(&"x".repeat(MAX_NAME_CHARS + 1)));
    }

    #[test]
    fn front_matter_is_split_and_read() {
        let text = "---\nname: pdf\ndescription: \"Fill PDF forms\"\n---\n# Body\n";
        assert_eq!(
            split_front_matter(text),
            (
                Some("name: pdf\ndescription: \"Fill PDF forms\"\n"),
                "# Body\n"
            )
        );
        assert_eq!(
            front_matter_field(text, "description").as_deref(),
            Some("Fill PDF forms")
        );
        assert_eq!(front_matter_field(text, "missing"), None);
        let crlf = "---\r\ndescription: 'x'\r\n---\r\nbody";
        assert_eq!(
            front_matter_field(crlf, "description").as_deref(),
            Some("x")
        );
        // No closing line: no front matter, the text is all body.
        assert_eq!(split_front_matter("---\nopen"), (None, "---\nopen"));
        assert_eq!(split_front_matter("# no front"), (None, "# no front"));
    }
}
