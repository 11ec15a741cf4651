//! The tree the search tools are compared with `rg` on: nested directories, a git repository
//! with a `.gitignore`, hidden entries, binary files, CRLF and unicode lines, several file
//! types, a file without a final newline, and a symlink.

use std::os::unix::fs::symlink;

use crate::search::harness::Workspace;

const MAIN_RS: &str = "\
use std::io;

fn main() {
    let needle = 1;
    println!(\"{needle}\");
}

fn helper() -> io::Result<()> {
    // TODO: needle handling
    Ok(())
}
";

const GUIDE: &str = "\
Guide
one
two
needle at four
five
six
seven
eight
nine
needle at ten
needle at eleven
twelve
thirteen
fourteen
fifteen
sixteen
Needle at seventeen
";

/// Fills the workspace with the fixture.
pub fn build(ws: &Workspace) {
    // `.gitignore` applies inside a git repository only, as for rg and git.
    std::fs::create_dir_all(ws.root.join(".git")).unwrap();
    ws.write(
        ".git/HEAD",
        "ref: refs/heads/main\nneedle in git metadata\n",
    );
    // The anchored rule is read as a parent's rule when `src` or deeper is searched.
    ws.write(".gitignore", "ignored/\n*.log\n/src/nested/skipped.rs\n");
    ws.write(".rgignore", "rgignored.txt\n");
    ws.write(".hidden.txt", "needle in a hidden file\n");
    ws.write(".config/settings.toml", "needle = \"hidden dir\"\n");
    ws.write("ignored/skip.txt", "needle in an ignored dir\n");
    ws.write("build.log", "needle in an ignored log\n");
    ws.write("rgignored.txt", "needle ignored by .rgignore\n");
    ws.write("bin.dat", b"needle\0binary needle\n");
    let mut late_binary = b"needle before the binary part\n".to_vec();
    for i in 0..3000 {
        late_binary.extend_from_slice(format!("filler line {i} of text\n").as_bytes());
    }
    late_binary.extend_from_slice(b"needle after\0the nul\n");
    ws.write("late_binary.dat", late_binary);
    ws.write(
        "crlf.txt",
        "first needle\r\nsecond line\r\nNEEDLE third\r\n",
    );
    ws.write(
        "unicode.md",
        "# Título\nnaïve needle café\nΣίσυφος NEEDLE Ωμέγα\n日本語 needle 終わり\nCAFÉ au lait\n",
    );
    ws.write("README.md", "# Fixture\n\nSearch for the needle here.\n");
    ws.write("noeol.txt", "last line needle without newline");
    ws.write("empty.txt", "");
    ws.write("src/main.rs", MAIN_RS);
    ws.write(
        "src/lib.rs",
        "pub mod nested;\n\npub fn needle_count() -> usize {\n    42\n}\n",
    );
    ws.write(
        "src/nested/deep/mod.rs",
        "// deep needle\nstruct Needle {\n    field: u8,\n}\n",
    );
    ws.write(
        "src/nested/skipped.rs",
        "// needle in a file ignored from the root\n",
    );
    ws.write(
        "src/nested/util.py",
        "def find_needle(haystack):\n    return haystack.index('needle')\n",
    );
    ws.write(
        "web/app.js",
        "const needle = 'x';\nfunction run() {\n  return needle;\n}\n",
    );
    ws.write("web/app.ts", "export const NEEDLE: string = 'y';\n");
    ws.write("docs/guide.txt", GUIDE);
    ws.write("docs/notes.md", "needle\nneedle\nneedle\n");
    // rg does not follow symlinks: neither the link nor its target's copy is searched twice.
    symlink(ws.root.join("src/main.rs"), ws.root.join("link.rs")).unwrap();
}
