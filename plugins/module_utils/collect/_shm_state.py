# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``shm`` subset as the node reads it: the text of /proc/meminfo, /proc/self/mountinfo and /etc/fstab (each
bounded: TEXT_MAX_BYTES), the page size, and statvfs of the path.  It parses nothing: parsers/_mounts.shm_facts
turns this into the ``shm`` namespace (on the controller for gpu_node_facts, on the node for shm_facts).

No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._node_state import read_raw

# The most the node returns of each file (parsers/_mounts.TEXT_MAX_BYTES holds the same bounds, and refuses more):
# a mount table of a host running thousands of containers stays under 4 MiB.
TEXT_MAX_BYTES = {'meminfo': 64 * 1024, 'mountinfo': 4 * 1024 * 1024, 'fstab': 1024 * 1024}
FILES = {'meminfo': 'proc/meminfo', 'mountinfo': 'proc/self/mountinfo', 'fstab': 'etc/fstab'}
# The shared memory mount point that is reported, not a place for temporary files.
SHM_PATH = '/dev/shm'  # nosec B108


def read_shm(path=SHM_PATH, root='/'):
    """What parsers/_mounts.shm_facts reads: ``{'path', 'live', 'page_size', 'meminfo', 'mountinfo', 'fstab' (records
    of collect/_node_state.read_raw), 'statvfs'}``; ``statvfs`` (of the path, on the live system only): ``{'blocks',
    'frsize', 'bavail', 'bfree'}`` or ``{'error'}``."""
    root = root or '/'
    live = root == '/'
    read = {'path': path, 'live': live, 'page_size': os.sysconf('SC_PAGE_SIZE') if live else 4096, 'statvfs': None}
    for name, rel in FILES.items():
        read[name] = read_raw(os.path.join(root, rel), TEXT_MAX_BYTES[name])
    if live:
        try:
            st = os.statvfs(path)
        except OSError as exc:
            read['statvfs'] = {'error': str(exc)}
        else:
            read['statvfs'] = {'blocks': st.f_blocks, 'frsize': st.f_frsize, 'bavail': st.f_bavail,
                               'bfree': st.f_bfree}
    return read
