//! Reading a remote cluster's kubeconfig (SPEC §31): the facts the core decides on, and the
//! client configuration once it has. Parsing uses kube's own `Kubeconfig` types, so what
//! is checked is exactly what the client would use: the current context's cluster and user.

use kube::config::{KubeConfigOptions, Kubeconfig};
use opm_core::remote::{KubeConfigError, KubeConfigFacts};

/// The facts of `bytes`, read from `key`: digest, server and the fields that run a command
/// or name a file. Nothing here reads a file or runs anything.
pub fn facts(key: &str, bytes: &[u8]) -> Result<KubeConfigFacts, KubeConfigError> {
    let kc = parse(bytes)?;
    let context = current_context(&kc)?;
    let mut insecure = Vec::new();
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref());
    let Some(cluster) = cluster else {
        return Err(unparsable(format!(
            "the current context names cluster {:?}, which it does not define",
            context.cluster
        )));
    };
    if cluster.certificate_authority.is_some() {
        insecure.push(format!(
            "clusters[{}].cluster.certificate-authority",
            context.cluster
        ));
    }
    if let Some(user) = &context.user {
        let auth = kc
            .auth_infos
            .iter()
            .find(|a| &a.name == user)
            .and_then(|a| a.auth_info.as_ref());
        if let Some(a) = auth {
            let at = |field: &str| format!("users[{user}].user.{field}");
            for (set, field) in [
                (a.exec.is_some(), "exec"),
                (a.auth_provider.is_some(), "auth-provider"),
                (a.token_file.is_some(), "tokenFile"),
                (a.client_certificate.is_some(), "client-certificate"),
                (a.client_key.is_some(), "client-key"),
            ] {
                if set {
                    insecure.push(at(field));
                }
            }
        }
    }
    Ok(KubeConfigFacts {
        key: key.to_string(),
        digest: opm_core::digest::sha256(bytes),
        server: cluster.server.clone().unwrap_or_default(),
        insecure,
    })
}

/// The client configuration of `bytes` (the core has accepted its facts).
pub async fn config(bytes: &[u8]) -> Result<kube::Config, String> {
    let kc = parse(bytes).map_err(|e| e.to_string())?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())
}

fn parse(bytes: &[u8]) -> Result<Kubeconfig, KubeConfigError> {
    let text = std::str::from_utf8(bytes).map_err(|_| unparsable("not UTF-8 text".into()))?;
    // The parser's message may quote the document (a token, a key): only where it failed
    // is kept.
    Kubeconfig::from_yaml(text).map_err(|e| unparsable(parse_failure(&e.to_string())))
}

fn current_context(kc: &Kubeconfig) -> Result<&kube::config::Context, KubeConfigError> {
    let name = kc
        .current_context
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| unparsable("it has no current-context".into()))?;
    kc.contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| unparsable(format!("its current-context {name:?} is not defined")))
}

fn unparsable(message: String) -> KubeConfigError {
    KubeConfigError::Unparsable { message }
}

/// "it does not parse as a kubeconfig", with the parser's `line N column M` when it gave
/// one, and nothing else of its message (which may quote a credential).
fn parse_failure(message: &str) -> String {
    let at = message.find("line ").and_then(|i| {
        let rest = &message[i..];
        let words: Vec<&str> = rest.split_whitespace().take(4).collect();
        let digits = |w: &str| w.trim_matches(|c: char| !c.is_ascii_digit()).to_string();
        match words.as_slice() {
            ["line", l, "column", c] if !digits(l).is_empty() && !digits(c).is_empty() => {
                Some(format!(" (at line {} column {})", digits(l), digits(c)))
            }
            _ => None,
        }
    });
    format!(
        "it does not parse as a kubeconfig{}",
        at.unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const INLINE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://10.1.2.3:6443\n    certificate-authority-data: AAAA\nusers:\n- name: ci\n  user:\n    token: abc\ncontexts:\n- name: prod\n  context:\n    cluster: prod\n    user: ci\ncurrent-context: prod\n";

    #[test]
    fn an_inline_kubeconfig_has_its_server_and_nothing_insecure() {
        let f = facts("value", INLINE.as_bytes()).unwrap();
        assert_eq!(f.server, "https://10.1.2.3:6443");
        assert!(f.insecure.is_empty(), "{:?}", f.insecure);
        assert_eq!(f.digest, opm_core::digest::sha256(INLINE.as_bytes()));
        assert_eq!(f.key, "value");
    }

    #[test]
    fn commands_and_file_paths_of_the_current_context_are_named() {
        let exec = INLINE.replace(
            "    token: abc\n",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n    client-certificate: /etc/passwd\n",
        );
        let f = facts("value", exec.as_bytes()).unwrap();
        assert_eq!(
            f.insecure,
            ["users[ci].user.exec", "users[ci].user.client-certificate"]
        );
        let ca = INLINE.replace(
            "certificate-authority-data: AAAA",
            "certificate-authority: /etc/ssl/ca.pem",
        );
        assert_eq!(
            facts("value", ca.as_bytes()).unwrap().insecure,
            ["clusters[prod].cluster.certificate-authority"]
        );
        let token_file = INLINE.replace("token: abc", "tokenFile: /var/run/token");
        assert_eq!(
            facts("value", token_file.as_bytes()).unwrap().insecure,
            ["users[ci].user.tokenFile"]
        );
    }

    #[test]
    fn a_document_without_a_usable_context_is_unparsable() {
        let none = INLINE.replace("current-context: prod\n", "");
        assert!(matches!(
            facts("value", none.as_bytes()),
            Err(KubeConfigError::Unparsable { .. })
        ));
        assert!(matches!(
            facts("value", b"\xff\xfe"),
            Err(KubeConfigError::Unparsable { .. })
        ));
        assert!(matches!(
            facts("value", b"clusters: 7"),
            Err(KubeConfigError::Unparsable { .. })
        ));
        // A credential in a malformed document is never quoted back.
        let bad = "users:\n- name: ci\n  user:\n    token: [s3cr3t-t0ken\n";
        let Err(KubeConfigError::Unparsable { message }) = facts("value", bad.as_bytes()) else {
            panic!("unparsable");
        };
        assert!(!message.contains("s3cr3t"), "{message}");
        assert!(
            message.starts_with("it does not parse as a kubeconfig"),
            "{message}"
        );
    }
}
