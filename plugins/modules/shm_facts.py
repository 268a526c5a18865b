#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: shm_facts
short_description: Report the size and mount options of /dev/shm, live and in /etc/fstab
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
seealso:
  - module: gpufleet.nodeprep.gpu_node_facts
    description: Gathers these facts together with the GPU, kernel, limits, shm and NIC facts in one round trip, as
      the roles do.
description:
  - Finds O(path) in C(/proc/self/mountinfo) and reports whether it is mounted, its file system type and options.
  - Reports size, used and free bytes from C(statvfs) (as C(df -B1) shows them).
  - Reports the C(/etc/fstab) entry for O(path), its options and the size it asks for in bytes. Sizes in
    C(k), C(m), C(g), C(t) (base 1024), plain bytes, C(nr_blocks=) pages or a percentage of RAM are converted the
    way tmpfs does (rounded up to whole pages, RAM is C(MemTotal) from C(/proc/meminfo)). A tmpfs entry without a
    size gets tmpfs' default, half of RAM.
  - A tmpfs without a limit (C(size=0) or C(nr_blocks=0), live or in fstab) is reported with C(unlimited=true) and
    C(size_bytes=null), never as 0 bytes.
  - Lines of C(/etc/fstab) that are not entries (mount skips them at boot), bytes that are not UTF-8 (returned with
    C(\\x) escapes) and a C(size=) tmpfs would refuse on the entry for O(path) do not fail the task; each is listed
    in RV(ansible_facts.shm.errors) with the file and line.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
  - gpufleet.nodeprep.facts_module.ROOT
options:
  path:
    description: The mount point to report.
    type: path
    default: /dev/shm
  root:
    description:
      - Read C(proc/) and C(etc/fstab) below this directory. With another root than C(/), no C(statvfs) is done;
        the size comes from the mount's C(size=) option and used/free are null.
"""

EXAMPLES = r"""
- name: Read /dev/shm
  gpufleet.nodeprep.shm_facts:

- name: Require at least 64 GiB of /dev/shm, live and after reboot
  ansible.builtin.assert:
    that:
      - ansible_facts.shm.size_bytes >= 64 * 1024 ** 3
      - ansible_facts.shm.fstab is not none
      - ansible_facts.shm.fstab.size_bytes >= 64 * 1024 ** 3
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(shm).
  returned: always
  type: dict
  contains:
    shm:
      description: State of O(path).
      returned: always
      type: dict
      contains:
        path:
          description: The mount point looked at.
          type: str
          sample: /dev/shm
        mounted:
          description: Whether O(path) is a mount point now.
          type: bool
        fstype:
          description: File system type, null when not mounted.
          type: str
          sample: tmpfs
        source:
          description: The mount source, null when not mounted.
          type: str
        size_bytes:
          description: Total size in bytes (statvfs blocks times fragment size), null when not mounted or unlimited.
          type: int
          sample: 25325268992
        unlimited:
          description: Whether O(path) is a tmpfs without a size limit (mounted with C(size=0) or C(nr_blocks=0)).
          type: bool
        errors:
          description:
            - One text (the fstab path, the line number, then why) for each line of C(/etc/fstab) that is not an
              entry or not UTF-8, and for a C(size=) on the entry for O(path) that tmpfs refuses.
            - Non-empty means the size after the next boot is unknown; a check must treat that as a failure, not a pass.
          type: list
          elements: str
          sample: ["/etc/fstab line 12: expected at least 'spec file vfstype', got 'junk'"]
        used_bytes:
          description: Bytes in use, null when not mounted or not measured.
          type: int
        free_bytes:
          description: Bytes available, null when not mounted or not measured.
          type: int
        mount_options:
          description: Mount options followed by the superblock options not already listed.
          type: list
          elements: str
          sample: [rw, nosuid, nodev, relatime, size=24731708k]
        ram_bytes:
          description: MemTotal in bytes, null when unreadable.
          type: int
        swap_bytes:
          description: SwapTotal in bytes, null when unreadable (the shm role refuses a size above RAM + swap).
          type: int
        default_size_bytes:
          description: What a tmpfs without C(size=) gets (half of RAM, whole pages).
          type: int
        fstab:
          description: The last C(/etc/fstab) line for O(path), or null.
          type: dict
          contains:
            options:
              description: Its options.
              type: list
              elements: str
            size_bytes:
              description:
                - The size it gives in bytes (tmpfs' default when it sets none); null when not tmpfs, when unlimited
                  and when its C(size=) cannot be read (see RV(ansible_facts.shm.errors)).
              type: int
            unlimited:
              description: Whether the line sets no limit (C(size=0) or C(nr_blocks=0)).
              type: bool
            size_explicit:
              description: Whether the line sets C(size=) or C(nr_blocks=).
              type: bool
            vfstype:
              description: Its file system type.
              type: str
            spec:
              description: Its first field.
              type: str
            line:
              description: Line number in C(/etc/fstab).
              type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import run_facts_module
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._mounts import SHM_PATH, ShmError, shm_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._shm_state import read_shm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default=SHM_PATH),
            root=dict(type='path', default='/'),
        ),
        supports_check_mode=True,
    )
    path = module.params['path']
    # Read and parsed here (gpu_node_facts parses the same read on the controller).
    run_facts_module(module, 'shm', lambda: shm_facts(read_shm(path=path, root=module.params['root'])),
                     (ShmError, OSError), prefix='{0}: '.format(path))


if __name__ == '__main__':
    main()
