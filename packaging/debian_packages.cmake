# The Debian packages, made by CPack from the install components (see
# CMakeLists.txt beside this file): ddprun, and ddprun-train when LibTorch
# was found. Their dependencies are what dpkg-shlibdeps finds the binaries
# need, so a node without LibTorch installs the launcher alone.

set(DDPRUN_PACKAGE_MAINTAINER "ddprun maintainers <ddprun@invalid>" CACHE STRING
    "The Maintainer field of the Debian packages (set your site's)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ddprun)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DDPRUN_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Debian's binaries carry no symbols; the build's debug information stays in
# the build tree.
set(CPACK_STRIP_FILES ON)

# One package per component.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_COMPONENTS_ALL ddprun)
# ddprun-train only over a LibTorch a Debian package owns: dpkg-shlibdeps
# finds no package for another (a PyTorch wheel's), CPack lets that pass,
# and the package would depend on no LibTorch at all.
if(TARGET train AND TORCH_LIBRARY)
  get_filename_component(torch_library "${TORCH_LIBRARY}" REALPATH)
  execute_process(COMMAND dpkg-query --search "${torch_library}"
                  RESULT_VARIABLE torch_not_packaged OUTPUT_QUIET ERROR_QUIET)
  if(torch_not_packaged)
    message(WARNING "ddprun: no ddprun-train package: LibTorch (${torch_library}) is not "
                    "installed by a Debian package, so the package could not depend on it")
  else()
    list(APPEND CPACK_COMPONENTS_ALL train)
  endif()
endif()

# Installed under /usr. CPack runs each component's install with that prefix
# and the package's staging directory as DESTDIR, so what the install writes
# from the prefix, the unit's ExecStart, names /usr/bin/ddprund.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_DEBIAN_DDPRUN_PACKAGE_NAME ddprun)
set(CPACK_DEBIAN_DDPRUN_PACKAGE_SECTION utils)
# hwloc is loaded (dlopen) when --numa-binding reads the topology, so
# dpkg-shlibdeps, which reads DT_NEEDED, does not find it: named here, and
# the libraries it finds are added to this.
set(CPACK_DEBIAN_DDPRUN_PACKAGE_DEPENDS "libhwloc15")
set(CPACK_DEBIAN_DDPRUN_PACKAGE_SUGGESTS "ddprun-train, python3-torch")
set(CPACK_DEBIAN_DDPRUN_DESCRIPTION
    "launcher for distributed PyTorch jobs, a drop-in for torchrun
ddprun starts and supervises the workers of a distributed PyTorch job on
each node, with torchrun's flags, environment and exit statuses; it runs
Python scripts and native programs alike, standalone, across nodes, under
Slurm, and in elastic jobs. ddprund is its rendezvous daemon: a TCPStore
server for PyTorch 1.13 to 2.10+, with a hardened systemd unit that is
installed but not enabled.")
# The unit is installed, never enabled nor started by the package: see
# debian/postinst. No system user is made: the unit's DynamicUser=yes gives
# ddprund a fresh unprivileged user at each start, and ddprund owns no file,
# so a user made by the package would only outlive it after a purge.
set(CPACK_DEBIAN_DDPRUN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_CURRENT_SOURCE_DIR}/debian/postinst"
    "${CMAKE_CURRENT_SOURCE_DIR}/debian/prerm"
    "${CMAKE_CURRENT_SOURCE_DIR}/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_TRAIN_PACKAGE_NAME ddprun-train)
set(CPACK_DEBIAN_TRAIN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_TRAIN_PACKAGE_RECOMMENDS ddprun)
set(CPACK_DEBIAN_TRAIN_PACKAGE_SUGGESTS dataset-fashion-mnist)
set(CPACK_DEBIAN_TRAIN_DESCRIPTION
    "ddprun's LibTorch DDP trainer, with snapshots and resume
train is the PyTorch tutorials' distributed data-parallel trainer written
in C++ on LibTorch: Gloo process group, DDP's bucketed gradient
all-reduce, PyTorch's DistributedSampler, atomic snapshots and resume after
a restart. Tasks: a synthetic MLP, and Fashion-MNIST classification and
auto-encoding (from dataset-fashion-mnist).")

include(CPack)
