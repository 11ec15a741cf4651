//! Unit tests of the sandbox's choice (`mod.rs`): which mode picks what, and refusals.

use super::*;

fn capability(bwrap: bool, landlock: bool) -> SandboxCapability {
    SandboxCapability {
        bubblewrap: if bwrap {
            Ok(())
        } else {
            Err("no bwrap".into())
        },
        landlock_abi: if landlock {
            Ok(4)
        } else {
            Err("no landlock".into())
        },
    }
}

fn choose(mode: SandboxMode, allow: bool, bwrap: bool, landlock: bool) -> Choice {
    let settings = SandboxSettings {
        mode,
        allow_unsandboxed: allow,
        ..SandboxSettings::default()
    };
    super::choose(&settings, &capability(bwrap, landlock))
}

#[test]
fn each_mode_picks_what_the_machine_offers_and_refuses_otherwise() {
    use SandboxMode::*;
    assert_eq!(choose(Auto, false, true, true), Choice::Bubblewrap);
    assert_eq!(
        choose(Auto, false, false, true),
        Choice::Landlock { abi: 4 }
    );
    assert!(
        matches!(choose(Auto, false, false, false), Choice::Refused { why } if why.contains("no bwrap") && why.contains("no landlock"))
    );
    assert_eq!(choose(Auto, true, false, false), Choice::Unsandboxed);
    assert_eq!(
        choose(Landlock, false, true, true),
        Choice::Landlock { abi: 4 }
    );
    assert!(matches!(
        choose(Bwrap, false, false, true),
        Choice::Refused { .. }
    ));
    assert!(matches!(
        choose(Off, false, true, true),
        Choice::Refused { .. }
    ));
    assert_eq!(choose(Off, true, true, true), Choice::Unsandboxed);
}

#[test]
fn refused_calls_say_why_and_full_access_runs_unconfined() {
    let settings = SandboxSettings {
        mode: SandboxMode::Off,
        ..SandboxSettings::default()
    };
    let sandbox = ShellSandbox::resolve(&settings, &capability(true, true), Path::new("/d"));
    assert!(!sandbox.confines());
    let ws = Path::new("/w");
    let spawners = SpawnerSet::default();
    let err = sandbox
        .confine(
            &spawners,
            ("s", None),
            ws,
            PermissionLevel::WorkspaceWrite,
            false,
            None,
        )
        .unwrap_err();
    assert!(
        err.message().contains("allow_unsandboxed"),
        "{}",
        err.message()
    );
    let full = sandbox
        .confine(
            &spawners,
            ("s", None),
            ws,
            PermissionLevel::DangerFullAccess,
            false,
            None,
        )
        .unwrap();
    assert_eq!(full.kind(), SandboxKind::None);
}
