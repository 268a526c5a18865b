# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``shm`` namespace of gpu_node_facts and shm_facts: /dev/shm as mounted, as fstab would mount it, and its size
and use, read from /proc/self/mountinfo, /etc/fstab, /proc/meminfo and statvfs.  The parsers are parsers/_mounts.py.

No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import to_display
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._mounts import (
    SHM_PATH,
    ShmError,
    find_fstab,
    find_mount,
    is_unlimited,
    merge_options,
    parse_fstab_lines,
    parse_meminfo,
    parse_mountinfo,
    tmpfs_default_size,
    tmpfs_size_from_options,
)


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'surrogateescape')


def collect_shm_facts(module, path=SHM_PATH, root='/'):
    """Return the ``shm`` namespace. module is unused (kept for the collector contract).

    An unlimited tmpfs has size_bytes null and unlimited true (live and in fstab). Lines of /etc/fstab that are not
    entries, or not UTF-8, and a size= on the entry that tmpfs would refuse are listed in ``errors`` naming the
    file and line: the size after the next boot is then unknown.
    """
    root = root or '/'
    live = root == '/'
    page_size = os.sysconf('SC_PAGE_SIZE') if live else 4096
    ram_bytes = None
    swap_bytes = None
    try:
        meminfo = _read(os.path.join(root, 'proc/meminfo'))
    except (IOError, OSError):
        meminfo = None
    if meminfo is not None:
        ram_bytes = parse_meminfo(meminfo)
        try:
            swap_bytes = parse_meminfo(meminfo, 'SwapTotal')
        except ShmError:
            swap_bytes = None
    mountinfo_path = os.path.join(root, 'proc/self/mountinfo')
    try:
        mounts = parse_mountinfo(_read(mountinfo_path))
    except (IOError, OSError) as exc:
        raise ShmError('cannot read {0}: {1}'.format(mountinfo_path, exc))
    mount = find_mount(mounts, path)
    facts = {'path': path, 'mounted': mount is not None, 'fstype': None, 'source': None, 'size_bytes': None,
             'unlimited': False, 'used_bytes': None, 'free_bytes': None, 'mount_options': [], 'fstab': None,
             'ram_bytes': ram_bytes, 'swap_bytes': swap_bytes, 'default_size_bytes': None, 'errors': []}
    if ram_bytes is not None:
        facts['default_size_bytes'] = tmpfs_default_size(ram_bytes, page_size)
    if mount is not None:
        facts['fstype'] = mount['fstype']
        facts['source'] = to_display(mount['source'])
        facts['mount_options'] = [to_display(o) for o in merge_options(mount)]
        size = None
        if mount['fstype'] == 'tmpfs':
            size = tmpfs_size_from_options(mount['super_options'], ram_bytes, page_size)
        if live:
            st = os.statvfs(path)
            if mount['fstype'] == 'tmpfs' and (st.f_blocks == 0 or is_unlimited(size)):
                facts['unlimited'] = True  # tmpfs reports no blocks when it has no limit
            else:
                facts['size_bytes'] = st.f_blocks * st.f_frsize
                facts['free_bytes'] = st.f_bavail * st.f_frsize
            facts['used_bytes'] = (st.f_blocks - st.f_bfree) * st.f_frsize if st.f_blocks else None
        elif mount['fstype'] == 'tmpfs':
            if is_unlimited(size):
                facts['unlimited'] = True
            else:
                facts['size_bytes'] = size if size is not None else facts['default_size_bytes']
    fstab_path = os.path.join(root, 'etc/fstab')
    if os.path.exists(fstab_path):
        entries, errors = parse_fstab_lines(_read(fstab_path), to_display(fstab_path))
        facts['errors'].extend(errors)
        entry = find_fstab(entries, path)
        if entry is not None:
            size = None
            explicit = False
            unlimited = False
            if entry['vfstype'] == 'tmpfs':
                try:
                    size = tmpfs_size_from_options(entry['options'], ram_bytes, page_size)
                except ShmError as exc:
                    facts['errors'].append('{0} line {1}: {2}'.format(to_display(fstab_path), entry['line'], exc))
                else:
                    explicit = size is not None
                    unlimited = is_unlimited(size)
                    if unlimited:
                        size = None
                    elif size is None and ram_bytes is not None:
                        size = tmpfs_default_size(ram_bytes, page_size)
            facts['fstab'] = {'options': entry['options'], 'size_bytes': size, 'size_explicit': explicit,
                              'unlimited': unlimited, 'vfstype': entry['vfstype'], 'spec': entry['spec'],
                              'line': entry['line']}
    return facts
