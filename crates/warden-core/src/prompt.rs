//! Which output asks for a line of input. Only the last line of the most
//! recent output counts, and only high-confidence interactive prompts:
//! yes/no choices in brackets or parentheses at the end of the line, and
//! `Continue?` / `Proceed?` questions. Prompts for secrets (passwords,
//! passphrases, tokens, codes) are restricted: they are recognised so they
//! are never offered to a text-line responder.

/// The longest answer, in bytes: a terminal in line mode keeps at most
/// 4095 characters of a line before its newline (Linux `N_TTY_BUF_SIZE`),
/// so a longer answer would arrive cut short.
pub const MAX_ANSWER: usize = 4095;

/// Checks an answer's text, the same for every route that answers a
/// prompt (A2A `hitl-prompt/v1`, the HITL route, AIWG
/// `mission.hitl_responded`): at most [`MAX_ANSWER`] bytes, no control
/// characters (one line; the newline is warden's). The error: the rule
/// broken and what to do.
pub fn check_answer(text: &str) -> Result<(), (&'static str, String)> {
    if text.len() > MAX_ANSWER {
        return Err((
            "hitl.text_length",
            format!("the answer is {} bytes; at most {MAX_ANSWER}", text.len()),
        ));
    }
    if text.chars().any(char::is_control) {
        return Err((
            "hitl.text_control",
            "the answer contains a control character (one line of text, no newline)".into(),
        ));
    }
    Ok(())
}

/// How much recent output is kept to find the last line.
pub const PROMPT_WINDOW: usize = 8 * 1024;

/// What the last line of output is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastLine {
    /// Not a prompt (or no line yet).
    Output,
    /// An interactive prompt a text line may answer; the line, cleaned.
    Prompt(String),
    /// A prompt for a secret: not offered on the text-line route.
    Restricted(String),
}

/// Endings of a yes/no prompt, compared in lower case after any trailing
/// `:` or `?` and spaces.
const CHOICES: [&str; 6] = [
    "[y/n]", "(y/n)", "[yes/no]", "(yes/no)", "[y/n/a]", "(y/n/a)",
];

/// Last words of a question that waits for confirmation.
const QUESTIONS: [&str; 2] = ["continue", "proceed"];

/// Words that make a prompt one for a secret.
const RESTRICTED: [&str; 9] = [
    "password",
    "passphrase",
    "passcode",
    "pin",
    "token",
    "secret",
    "otp",
    "verification code",
    "api key",
];

/// Keeps the tail of a run's output and says what its last line is.
#[derive(Debug, Default, Clone)]
pub struct PromptWatch {
    tail: Vec<u8>,
}

impl PromptWatch {
    /// Adds output and classifies the last line as it now stands.
    pub fn push(&mut self, data: &[u8]) -> LastLine {
        self.tail.extend_from_slice(data);
        if self.tail.len() > PROMPT_WINDOW {
            let cut = self.tail.len() - PROMPT_WINDOW;
            self.tail.drain(..cut);
        }
        let text = String::from_utf8_lossy(&self.tail);
        let last = text.rsplit('\n').next().unwrap_or("");
        classify(&strip_escapes(last))
    }
}

/// Removes terminal escape sequences and carriage returns (PTY output).
fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ params final-byte; other escapes: ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => out.clear(),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Classifies one line (already stripped of escapes).
pub fn classify(line: &str) -> LastLine {
    let shown = line.trim();
    if shown.is_empty() {
        return LastLine::Output;
    }
    let lower = shown.to_lowercase();
    let end = lower.trim_end_matches([':', '?', ' ']).trim_end();
    let choice = CHOICES.iter().any(|c| end.ends_with(c));
    let question = lower.ends_with('?')
        && QUESTIONS
            .iter()
            .any(|q| end.rsplit(|c: char| !c.is_alphanumeric()).next() == Some(q));
    let secret = RESTRICTED.iter().any(|w| word_in(&lower, w));
    if secret && (choice || question || lower.ends_with(':') || lower.ends_with(": ")) {
        return LastLine::Restricted(shown.to_owned());
    }
    if choice || question {
        LastLine::Prompt(shown.to_owned())
    } else {
        LastLine::Output
    }
}

/// Whether `phrase` occurs in `text` as whole words.
fn word_in(text: &str, phrase: &str) -> bool {
    text.match_indices(phrase).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + phrase.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(s: &str) -> bool {
        matches!(classify(s), LastLine::Prompt(_))
    }

    #[test]
    fn interactive_prompts_match() {
        for p in [
            "Overwrite file.txt? [y/N] ",
            "Apply changes [Y/n]:",
            "Delete branch (yes/no)?",
            "Really? (y/n)",
            "Continue?",
            "Do you want to proceed? ",
            "Install 3 packages [y/N/a]",
            "OK to continue? [YES/no]",
        ] {
            assert!(prompt(p), "{p:?} should be a prompt");
        }
    }

    #[test]
    fn near_misses_do_not_match() {
        for p in [
            "",
            "Answer [y/N] to confirm the next step below",
            "Use --yes/no to skip the questions",
            "continue",
            "Continuing with the build...",
            "Will it continue? yes, it did",
            "Progress 50% [=====>    ]",
            "warning: (y/n) prompts are disabled in CI.",
            "Proceedings?",
            "2 files changed",
        ] {
            assert_eq!(
                classify(p),
                LastLine::Output,
                "{p:?} should not be a prompt"
            );
        }
    }

    #[test]
    fn prompts_for_secrets_are_restricted() {
        for p in [
            "Password:",
            "Enter passphrase for key '/root/.ssh/id_ed25519':",
            "Store the API key? [y/N]",
            "GitHub token:",
            "Enter verification code:",
        ] {
            assert!(
                matches!(classify(p), LastLine::Restricted(_)),
                "{p:?} should be restricted"
            );
        }
        // Not a prompt at all, so nothing to restrict.
        assert_eq!(classify("password changed"), LastLine::Output);
        // A word containing a restricted one is fine.
        assert!(prompt("Spinning up? [y/N]"));
    }

    #[test]
    fn only_the_last_line_of_recent_output_counts() {
        let mut w = PromptWatch::default();
        assert_eq!(w.push(b"Continue? [y/N] y\nworking\n"), LastLine::Output);
        assert_eq!(
            w.push(b"\x1b[1mOverwrite?\x1b[0m [y/N] "),
            LastLine::Prompt("Overwrite? [y/N]".into())
        );
        // Split across chunks.
        let mut w = PromptWatch::default();
        assert_eq!(w.push(b"Apply [Y/"), LastLine::Output);
        assert!(matches!(w.push(b"n] "), LastLine::Prompt(_)));
        // A carriage return redraws the line.
        let mut w = PromptWatch::default();
        assert_eq!(w.push(b"Continue? [y/N]\rdone     "), LastLine::Output);
        // The window is bounded.
        let mut w = PromptWatch::default();
        w.push(&vec![b'x'; 3 * PROMPT_WINDOW]);
        assert!(w.tail.len() <= PROMPT_WINDOW);
    }
}
