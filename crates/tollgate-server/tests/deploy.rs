//! deploy/kubernetes, checked as far as a machine without a cluster can:
//! every manifest parses, every kustomization lists its files, the
//! ConfigMaps' policies pass `tollgate validate`, and each Deployment's
//! container runs here as the manifest writes it (its command or args, its
//! environment, its mounted ConfigMap; only the listen addresses, checked
//! against the container ports first, become loopback ports, and Redis a
//! `redis-server` of the test's): the probe paths, ports and metrics path
//! answer, and its Service, PodDisruptionBudget and ServiceMonitor name
//! what it has.

mod common;
#[path = "deploy/yaml.rs"]
mod yaml;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tollgate_testkit::RedisServer;

use common::service::{Service, temp_dir};

fn kubernetes() -> PathBuf {
    common::repo().join("deploy/kubernetes")
}

/// The documents of one manifest file.
fn manifest(path: &str) -> Vec<Value> {
    let file = kubernetes().join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    yaml::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The one document of `kind` in the file.
fn one(path: &str, kind: &str) -> Value {
    let mut docs: Vec<_> = manifest(path)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect();
    assert_eq!(docs.len(), 1, "{path}: one {kind}");
    docs.remove(0)
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

#[test]
fn every_manifest_parses_and_every_kustomization_lists_its_files() {
    let mut files = Vec::new();
    yaml_files(&kubernetes(), &mut files);
    let mut kinds = Vec::new();
    for file in &files {
        let docs = yaml::documents(&std::fs::read_to_string(file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!docs.is_empty(), "{}: no document", file.display());
        for doc in docs {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            assert!(
                doc["apiVersion"].is_string(),
                "{}: apiVersion",
                file.display()
            );
            if kind != "Kustomization" {
                assert!(
                    doc["metadata"]["name"].is_string(),
                    "{}: name",
                    file.display()
                );
            }
            kinds.push(kind);
        }
        if file.file_name().unwrap() != "kustomization.yaml" {
            continue;
        }
        // Its resources exist, and no manifest beside it is left out.
        let dir = file.parent().unwrap();
        let doc = &yaml::documents(&std::fs::read_to_string(file).unwrap()).unwrap()[0];
        let listed: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        for resource in &listed {
            let path = dir.join(resource);
            assert!(
                path.is_file() || path.join("kustomization.yaml").is_file(),
                "{}: {resource} is neither a file nor a kustomization",
                file.display()
            );
        }
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                assert!(
                    listed.contains(&name.as_str()),
                    "{}: {name} not listed",
                    file.display()
                );
            }
        }
    }
    kinds.sort();
    kinds.dedup();
    for kind in [
        "BackendTrafficPolicy",
        "ConfigMap",
        "Deployment",
        "Kustomization",
        "PodDisruptionBudget",
        "Service",
        "ServiceMonitor",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
}

/// `tollgate ARGS`, which must succeed.
fn tollgate(args: &[&str]) {
    let out = common::tollgate().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tollgate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes a ConfigMap's files into `dir`, as Kubernetes mounts them.
fn mount(config_map: &Value, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in config_map["data"].as_object().unwrap() {
        std::fs::write(dir.join(name), text.as_str().unwrap()).unwrap();
    }
}

#[test]
fn the_config_maps_pass_tollgate_validate() {
    let dir = temp_dir();
    mount(
        &one("tollgate/configmap.yaml", "ConfigMap"),
        &dir.join("own"),
    );
    tollgate(&[
        "validate",
        "--config",
        &dir.join("own/tollgate.toml").display().to_string(),
    ]);
    mount(&one("erl/configmap.yaml", "ConfigMap"), &dir.join("erl"));
    tollgate(&[
        "validate",
        "--envoy-config",
        &dir.join("erl").display().to_string(),
    ]);
    let gateway = one("envoy-gateway/envoy-gateway-config.yaml", "ConfigMap");
    let config = yaml::documents(gateway["data"]["envoy-gateway.yaml"].as_str().unwrap()).unwrap();
    let image = &config[0]["provider"]["kubernetes"]["rateLimitDeployment"]["container"]["image"];
    assert_eq!(image, &image_of("tollgate/deployment.yaml"));
}

fn container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// Every image of tollgate the manifests name is this version's.
fn image_of(path: &str) -> Value {
    let image = container(&one(path, "Deployment"))["image"].clone();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        image,
        format!("registry.example.com/tollgate:{version}"),
        "{path}"
    );
    image
}

/// The container port named `name`.
fn port(container: &Value, name: &str) -> u16 {
    let ports = container["ports"].as_array().unwrap();
    let port = ports.iter().find(|p| p["name"] == name);
    let number = port.unwrap_or_else(|| panic!("no port {name}"))["containerPort"].as_u64();
    u16::try_from(number.unwrap()).unwrap()
}

/// The container's variables as it would get them: `value`s, and the
/// secret's keys as `secrets` gives them.
fn environment(container: &Value, secrets: &[(&str, &str, &str)]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for var in container["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap().to_string();
        let value = match (&var["value"], &var["valueFrom"]["secretKeyRef"]) {
            (Value::String(v), Value::Null) => v.clone(),
            (Value::Null, secret) => secrets
                .iter()
                .find(|(s, k, _)| secret["name"] == *s && secret["key"] == *k)
                .unwrap_or_else(|| panic!("{name}: which secret? {secret}"))
                .2
                .to_string(),
            (other, _) => panic!("{name}: a variable's value is a string, not {other}"),
        };
        env.push((name, value));
    }
    env
}

/// Sets `name` to `value`, returning what the manifest had.
fn replace(env: &mut [(String, String)], name: &str, value: String) -> String {
    let var = env.iter_mut().find(|(n, _)| n == name);
    std::mem::replace(&mut var.unwrap_or_else(|| panic!("no {name}")).1, value)
}

/// The answer's status code.
fn status(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap()
}

fn probe_path(container: &Value, probe: &str) -> String {
    let get = &container[probe]["httpGet"];
    assert_eq!(get["port"], "http", "{probe} on the http port");
    get["path"].as_str().unwrap().to_string()
}

/// The Service selects the pods, and sends each of its ports to a named
/// container port.
fn check_service(path: &str, deployment: &Value) {
    let service = one(path, "Service");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "{path}: selector {key}");
    }
    for p in service["spec"]["ports"].as_array().unwrap() {
        port(container(deployment), p["targetPort"].as_str().unwrap());
    }
}

#[test]
fn the_own_mode_deployment_runs_as_written() {
    let deployment = one("tollgate/deployment.yaml", "Deployment");
    let c = container(&deployment);
    image_of("tollgate/deployment.yaml");
    let containerfile = std::fs::read_to_string(common::repo().join("deploy/image/Containerfile"));
    let containerfile = containerfile.unwrap();
    assert!(containerfile.contains("\nENTRYPOINT [\"/usr/local/bin/tollgate\"]\n"));
    // The config file, where the ConfigMap is mounted.
    let dir = temp_dir();
    let mounted = &c["volumeMounts"][0];
    assert_eq!(
        mounted["name"],
        deployment["spec"]["template"]["spec"]["volumes"][0]["name"]
    );
    let mount_path = mounted["mountPath"].as_str().unwrap();
    mount(&one("tollgate/configmap.yaml", "ConfigMap"), &dir);
    let args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace(mount_path, &dir.display().to_string())
        })
        .collect();
    assert_eq!(args[0], "serve");

    let redis = RedisServer::start();
    let mut env = environment(c, &[("tollgate", "token", "s3cret")]);
    for (var, name) in [
        ("TOLLGATE_LISTEN", "http"),
        ("TOLLGATE_GRPC_LISTEN", "grpc"),
    ] {
        let given: SocketAddr = replace(&mut env, var, "127.0.0.1:0".into())
            .parse()
            .unwrap();
        assert_eq!(
            given,
            SocketAddr::from(([0, 0, 0, 0], port(c, name))),
            "{var}"
        );
    }
    let given = replace(&mut env, "TOLLGATE_REDIS", redis.url());
    let redis_service = one("redis/redis.yaml", "Service");
    assert_eq!(
        given,
        format!(
            "redis://{}:{}",
            redis_service["metadata"]["name"].as_str().unwrap(),
            redis_service["spec"]["ports"][0]["port"]
        )
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = Service::run(&args, &env);
    assert!(s.grpc.is_some(), "gRPC listens");

    for probe in ["readinessProbe", "livenessProbe"] {
        let path = probe_path(c, probe);
        assert_eq!(status(&s.request("GET", &path, "")), 200, "{probe} {path}");
    }
    let check = r#"{"policy": "books", "key": "user-42"}"#;
    assert_eq!(status(&s.request("POST", "/v1/check", check)), 401);
    let token = "Authorization: Bearer s3cret\r\n";
    assert_eq!(
        status(&s.request_with("POST", "/v1/check", check, token)),
        200
    );
    let keys = redis.cli(&["--scan"]);
    assert!(!keys.trim().is_empty(), "the check counted in Redis");
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations["prometheus.io/port"],
        port(c, "http").to_string()
    );
    let metrics = annotations["prometheus.io/path"].as_str().unwrap();
    let answer = s.request_with("GET", metrics, "", token);
    assert_eq!(status(&answer), 200);
    assert!(answer.contains("tollgate_decisions_total{"), "{answer}");

    check_service("tollgate/service.yaml", &deployment);
    let pdb = one("tollgate/pdb.yaml", "PodDisruptionBudget");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "the budget's selector {key}");
    }
    let monitor = one("monitoring/servicemonitor.yaml", "ServiceMonitor");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["path"], metrics);
    let service = one("tollgate/service.yaml", "Service");
    assert!(
        service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == endpoint["port"])
    );
    let credentials = &endpoint["authorization"]["credentials"];
    assert_eq!(
        (&credentials["name"], &credentials["key"]),
        (&"tollgate".into(), &"token".into())
    );
}

#[test]
fn the_erl_deployment_runs_with_only_its_image_changed() {
    let deployment = one("erl/deployment.yaml", "Deployment");
    let c = container(&deployment);
    image_of("erl/deployment.yaml");
    // ERL's command, answered by the image's link of that name.
    assert_eq!(c["command"], serde_json::json!(["/bin/ratelimit"]));
    let dir = temp_dir();
    let program = dir.join("ratelimit");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tollgate"), &program).unwrap();

    let redis = RedisServer::start();
    let mut env = environment(c, &[]);
    let root = dir.join("data");
    let runtime_root = replace(&mut env, "RUNTIME_ROOT", root.display().to_string());
    let subdirectory = &env
        .iter()
        .find(|(n, _)| n == "RUNTIME_SUBDIRECTORY")
        .unwrap()
        .1;
    let mounted = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(
        mounted,
        format!("{runtime_root}/{subdirectory}/config"),
        "where ERL reads"
    );
    mount(
        &one("erl/configmap.yaml", "ConfigMap"),
        &root.join(subdirectory).join("config"),
    );
    replace(&mut env, "REDIS_URL", redis.addr().to_string());
    // ERL's ports are 8080 and 8081 unless PORT and GRPC_PORT say.
    assert!(
        !env.iter()
            .any(|(n, _)| n.contains("PORT") || n.contains("HOST"))
    );
    assert_eq!((port(c, "http"), port(c, "grpc")), (8080, 8081));
    for (name, value) in [
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", "0"),
    ] {
        env.push((name.into(), value.into()));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let s = Service::run_program(&program, &[], &env);

    for probe in ["readinessProbe", "livenessProbe"] {
        let path = probe_path(c, probe);
        assert_eq!(status(&s.request("GET", &path, "")), 200, "{probe} {path}");
    }
    let call = r#"{"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/api/books"}]}]}"#;
    let answer = s.request("POST", "/json", call);
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(answer.contains("\"overallCode\":\"OK\""), "{answer}");
    let keys = redis.cli(&["--scan"]);
    assert!(
        keys.contains("edge_path_/api/books_"),
        "ERL's key in Redis: {keys}"
    );
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations["prometheus.io/port"],
        port(c, "http").to_string()
    );
    let metrics = annotations["prometheus.io/path"].as_str().unwrap();
    assert_eq!(status(&s.request("GET", metrics, "")), 200);
    check_service("erl/service.yaml", &deployment);
}
