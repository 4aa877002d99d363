//! ROS 2 interface packages for the custom and generated types of some schemas: the
//! `.msg` and `.srv` files, `package.xml` and `CMakeLists.txt` that colcon builds, so
//! `ros2 topic echo` can decode what the bridge publishes. Sans I/O up to
//! [`InterfacePackage::write`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::idl::{Message, Service, TypeName};
use crate::interfaces::Interfaces;
use crate::mapping::{Origin, SchemaTypes};

/// The comment that marks a package as written by this tool: a package directory
/// without it is never overwritten.
pub const MARKER: &str = "Written by fcan-codegen ros-package";

/// One interface package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfacePackage {
    /// The package name.
    pub name: String,
    /// Its messages (type name without the package: `Feedback`), by name.
    pub messages: Vec<Message>,
    /// Its services, by name.
    pub services: Vec<Service>,
}

/// The packages holding every custom and generated type the mapped schemas use, and
/// fcan's own `fcan_msgs` (bundled interfaces come with ROS and are left out), by
/// package name.
pub fn packages(store: &Interfaces, mapped: &[SchemaTypes]) -> Vec<InterfacePackage> {
    let mut msgs: BTreeMap<String, BTreeMap<String, Message>> = BTreeMap::new();
    let mut srvs: BTreeMap<String, BTreeMap<String, Service>> = BTreeMap::new();
    for m in mapped {
        for t in m.topics.iter().filter(|t| t.origin != Origin::Bundled) {
            if let (Ok(name), Some(def)) =
                (TypeName::parse(&t.ros_type), store.message(&t.ros_type))
            {
                msgs.entry(name.package.to_string())
                    .or_default()
                    .insert(t.ros_type.clone(), def.clone());
            }
        }
        for s in m.services.iter().filter(|s| s.origin != Origin::Bundled) {
            if let (Ok(name), Some(def)) =
                (TypeName::parse(&s.ros_type), store.service(&s.ros_type))
            {
                srvs.entry(name.package.to_string())
                    .or_default()
                    .insert(s.ros_type.clone(), def.clone());
            }
        }
    }
    // fcan's own services, which the bridge serves on every node.
    for s in store.own_services() {
        if let Ok(name) = TypeName::parse(&s.name) {
            srvs.entry(name.package.to_string())
                .or_default()
                .insert(s.name.clone(), s.clone());
        }
    }
    let mut names: Vec<String> = msgs.keys().chain(srvs.keys()).cloned().collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| InterfacePackage {
            messages: msgs
                .remove(&name)
                .unwrap_or_default()
                .into_values()
                .collect(),
            services: srvs
                .remove(&name)
                .unwrap_or_default()
                .into_values()
                .collect(),
            name,
        })
        .collect()
}

fn short(full: &str) -> &str {
    full.rsplit('/').next().unwrap_or(full)
}

impl InterfacePackage {
    /// Every file, as (path inside the package directory, contents).
    pub fn files(&self) -> Vec<(PathBuf, String)> {
        let mut files = Vec::new();
        let mut listed = Vec::new();
        let header = format!("# {MARKER}: built from fcan schema fields (docs/ros2.md).\n");
        for m in &self.messages {
            let path = format!("msg/{}.msg", short(&m.name));
            files.push((PathBuf::from(&path), format!("{header}{}", m.to_msg_text())));
            listed.push(path);
        }
        for s in &self.services {
            let path = format!("srv/{}.srv", short(&s.name));
            files.push((PathBuf::from(&path), format!("{header}{}", s.to_srv_text())));
            listed.push(path);
        }
        files.push((PathBuf::from("package.xml"), self.package_xml()));
        files.push((PathBuf::from("CMakeLists.txt"), self.cmake_lists(&listed)));
        files
    }

    fn package_xml(&self) -> String {
        format!(
            r#"<?xml version="1.0"?>
<?xml-model href="http://download.ros.org/schema/package_format3.xsd" schematypens="http://www.w3.org/2001/XMLSchema"?>
<!-- {MARKER}. Written again on every run; edit the schemas instead. -->
<package format="3">
  <name>{name}</name>
  <version>0.0.0</version>
  <description>ROS 2 interfaces of fcan nodes, built from their schemas by fcan-codegen ros-package.</description>
  <maintainer email="maintainer@example.com">maintainer</maintainer>
  <license>Apache-2.0</license>

  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>

  <export>
    <build_type>ament_cmake</build_type>
  </export>
</package>
"#,
            name = self.name
        )
    }

    fn cmake_lists(&self, listed: &[String]) -> String {
        let mut s = format!(
            "# {MARKER}. Written again on every run; edit the schemas instead.\n\
             cmake_minimum_required(VERSION 3.8...3.31)\n\
             project({})\n\n\
             find_package(ament_cmake REQUIRED)\n\
             find_package(rosidl_default_generators REQUIRED)\n\n\
             rosidl_generate_interfaces(${{PROJECT_NAME}}\n",
            self.name
        );
        for f in listed {
            s.push_str(&format!("  \"{f}\"\n"));
        }
        s.push_str(")\n\nament_export_dependencies(rosidl_default_runtime)\nament_package()\n");
        s
    }

    /// Writes the package into `dir/<name>/`. A directory of that name that this tool
    /// did not write (its `package.xml` lacks [`MARKER`]) is refused; one it wrote has
    /// its `msg/` and `srv/` emptied first, so a type no schema uses any more goes.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let root = dir.join(&self.name);
        let xml = root.join("package.xml");
        if root.exists() {
            let ours = std::fs::read_to_string(&xml).is_ok_and(|s| s.contains(MARKER));
            if !ours {
                return Err(std::io::Error::other(format!(
                    "{} exists and was not written by fcan-codegen ros-package; not touching it",
                    root.display()
                )));
            }
            for sub in ["msg", "srv"] {
                let d = root.join(sub);
                if d.exists() {
                    std::fs::remove_dir_all(&d)?;
                }
            }
        }
        for (path, text) in self.files() {
            let p = root.join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, text)?;
        }
        Ok(root)
    }
}
