"""The gitfleet OCI image, built without a container daemon and without pulling a base image.

`build.build_image` runs the stages in order, each cached under `.cache/image/` by a key over
its inputs: `debian` (a Debian 12 root filesystem from Debian's archive, `mmdebstrap`),
`python` (the runtime dependencies as pinned wheels, installed by the image's own Python),
`tools` (helm and kubectl from the testbed's pinned Go builds), `app` (gitfleet from the source
tree), then `oci` assembles the four layers with `umoci` into an OCI layout and a
`docker load`-able tarball. Every layer is a tar written here with sorted entries and one
modification time (SOURCE_DATE_EPOCH), so the same inputs give the same digest.

Imports the testbed's build (for the binaries) and the shared errors; nothing in `fleet`.
"""
