# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _mounts as S
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _shm_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _shm

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

HOST = os.path.join(FIXTURES, 'host')
RAM = 2113140480 * 1024  # meminfo.2tib


def read(name):
    with open(os.path.join(HOST, name)) as handle:
        return handle.read()


@pytest.mark.parametrize('value, expected', [
    ('64g', 64 * 1024 ** 3),
    ('64G', 64 * 1024 ** 3),
    ('65536m', 64 * 1024 ** 3),
    ('1t', 1024 ** 4),
    ('67108864k', 64 * 1024 ** 3),
    ('1000', 4096),          # rounded up to a page
    ('0', 0),
    ('0x10000000', 256 * 1024 ** 2),
    ('010m', 8 * 1024 ** 2),  # memparse: a leading 0 is octal
    ('50%', RAM // 2),
    ('1%', (1 * 4096 * (RAM // 4096) // 100 + 4095) // 4096 * 4096),
])
def test_parse_tmpfs_size(value, expected):
    assert S.parse_tmpfs_size(value, RAM) == expected


@pytest.mark.parametrize('value, ram, message', [
    ('64q', RAM, 'size=64q: not a tmpfs size (allowed: bytes, or a number with k, m, g, t, p or e, '
                 'or a percentage of RAM such as 50%)'),
    ('', RAM, 'size=: not a tmpfs size (allowed: bytes, or a number with k, m, g, t, p or e, '
              'or a percentage of RAM such as 50%)'),
    ('5.5g', RAM, 'size=5.5g: not a tmpfs size (allowed: bytes, or a number with k, m, g, t, p or e, '
                  'or a percentage of RAM such as 50%)'),
    ('50%', None, 'size=50%: a percentage needs the size of RAM (MemTotal in /proc/meminfo)'),
])
def test_parse_tmpfs_size_errors(value, ram, message):
    with pytest.raises(S.ShmError) as exc:
        S.parse_tmpfs_size(value, ram)
    assert str(exc.value) == message


def test_meminfo():
    assert S.parse_meminfo(read('meminfo.2tib')) == RAM
    with pytest.raises(S.ShmError) as exc:
        S.parse_meminfo('MemFree: 1 kB\n')
    assert str(exc.value) == '/proc/meminfo: no MemTotal line'


def test_mountinfo_el9():
    mounts = S.parse_mountinfo(read('mountinfo.el9'))
    shm = S.find_mount(mounts, '/dev/shm')
    assert shm['fstype'] == 'tmpfs'
    assert shm['mount_options'] == ['rw', 'nosuid', 'nodev']
    assert shm['optional'] == ['shared:9']
    assert S.merge_options(shm) == ['rw', 'nosuid', 'nodev', 'seclabel', 'inode64']
    assert S.tmpfs_size_from_options(shm['super_options'], RAM) is None
    scratch = S.find_mount(mounts, '/mnt/scratch space')
    assert scratch['source'] == 'scratch'
    assert S.tmpfs_size_from_options(scratch['super_options'], RAM) == 1024 ** 3


def test_mountinfo_top_mount_wins():
    mounts = S.parse_mountinfo(read('mountinfo.debian12-resized'))
    shm = S.find_mount(mounts, '/dev/shm/')
    assert shm['mount_id'] == '131'
    assert S.tmpfs_size_from_options(shm['super_options'], RAM) == 64 * 1024 ** 3


@pytest.mark.parametrize('text, message', [
    ('22 97 0:21 / /proc rw,nosuid shared:12 proc proc rw', "mountinfo line 1: no ' - ' separator in "
     "'22 97 0:21 / /proc rw,nosuid shared:12 proc proc rw'"),
    ('22 97 0:21 / /proc rw - proc', "mountinfo line 1: too few fields in '22 97 0:21 / /proc rw - proc'"),
])
def test_mountinfo_errors(text, message):
    with pytest.raises(S.ShmError) as exc:
        S.parse_mountinfo(text)
    assert str(exc.value) == message


@pytest.mark.parametrize('name, options, size', [
    ('fstab.el9', None, None),
    ('fstab.el9-shm-64g', ['defaults', 'size=64g'], 64 * 1024 ** 3),
    ('fstab.debian12-shm', ['defaults', 'nosuid', 'nodev', 'size=50%'], RAM // 2),
    ('fstab.shm-no-size', ['rw', 'nosuid', 'nodev'], None),
    ('fstab.shm-nr-blocks', ['nr_blocks=1024', 'mode=1777'], 4 * 1024 ** 2),
    ('fstab.shm-twice', ['size=0x10000000'], 256 * 1024 ** 2),
])
def test_fstab_variants(name, options, size):
    entry = S.find_fstab(S.parse_fstab(read(name)), '/dev/shm')
    if options is None:
        assert entry is None
        return
    assert entry['options'] == options
    assert S.tmpfs_size_from_options(entry['options'], RAM) == size


def test_fstab_lines_reports_every_junk_line():
    text = 'junk\ntmpfs /dev/shm tmpfs size=8g 0 0\n# ok\nalso junk\n' + b'tmpfs /x tmpfs x-caf\xe9 0 0\n'.decode(
        'utf-8', 'surrogateescape')
    entries, errors = S.parse_fstab_lines(text, '/r/etc/fstab')
    assert [e['file'] for e in entries] == ['/dev/shm', '/x']
    assert entries[1]['options'] == ['x-caf\\xe9']
    assert errors == ["/r/etc/fstab line 1: expected at least 'spec file vfstype', got 'junk'",
                      "/r/etc/fstab line 4: expected at least 'spec file vfstype', got 'also junk'",
                      '/r/etc/fstab line 5: not UTF-8 (shown with \\x escapes)']


@pytest.mark.parametrize('options, size', [
    (['size=0'], 0), (['size=0k'], 0), (['nr_blocks=0'], 0), (['size=0%'], 0), (['size=1k'], 4096),
])
def test_unlimited_sizes(options, size):
    got = S.tmpfs_size_from_options(options, RAM)
    assert got == size
    assert S.is_unlimited(got) is (size == 0)


def test_fstab_errors():
    with pytest.raises(S.ShmError) as exc:
        S.parse_fstab('tmpfs /dev/shm\n')
    assert str(exc.value) == "/etc/fstab line 1: expected at least 'spec file vfstype', got 'tmpfs /dev/shm'"
    entry = S.find_fstab(S.parse_fstab(read('fstab.shm-bad-size')), '/dev/shm')
    with pytest.raises(S.ShmError) as exc:
        S.tmpfs_size_from_options(entry['options'], RAM)
    assert str(exc.value).startswith('size=64q: not a tmpfs size')


def test_default_size():
    assert S.tmpfs_default_size(RAM) == RAM // 2
    assert S.tmpfs_default_size(4096 * 3) == 4096


def _tree(tmp_path, mountinfo, fstab=None):
    (tmp_path / 'proc' / 'self').mkdir(parents=True)
    (tmp_path / 'etc').mkdir()
    shutil.copy(os.path.join(HOST, mountinfo), str(tmp_path / 'proc' / 'self' / 'mountinfo'))
    shutil.copy(os.path.join(HOST, 'meminfo.2tib'), str(tmp_path / 'proc' / 'meminfo'))
    if fstab:
        shutil.copy(os.path.join(HOST, fstab), str(tmp_path / 'etc' / 'fstab'))
    return str(tmp_path)


def test_collect_tree(tmp_path):
    root = _tree(tmp_path, 'mountinfo.debian12-resized', 'fstab.debian12-shm')
    facts = S.shm_facts(_shm_state.read_shm(root=root))
    assert facts['mounted'] is True
    assert facts['fstype'] == 'tmpfs'
    assert facts['size_bytes'] == 64 * 1024 ** 3
    assert facts['used_bytes'] is None
    assert facts['mount_options'] == ['rw', 'nosuid', 'nodev', 'relatime', 'size=67108864k', 'inode64']
    assert facts['fstab'] == {'options': ['defaults', 'nosuid', 'nodev', 'size=50%'], 'size_bytes': RAM // 2,
                              'size_explicit': True, 'unlimited': False, 'vfstype': 'tmpfs', 'spec': 'tmpfs',
                              'line': 17}


def test_collect_tree_not_mounted(tmp_path):
    root = _tree(tmp_path, 'mountinfo.el9', 'fstab.el9')
    facts = S.shm_facts(_shm_state.read_shm(path='/dev/hugepages', root=root))
    assert facts['mounted'] is False and facts['size_bytes'] is None and facts['fstab'] is None


def test_collect_live_matches_statvfs():
    facts = S.shm_facts(_shm_state.read_shm())
    st = os.statvfs('/dev/shm')
    assert facts['mounted'] is True
    assert facts['size_bytes'] == st.f_blocks * st.f_frsize
    df = subprocess.check_output(['df', '-B1', '--output=size', '/dev/shm']).decode().split()
    assert facts['size_bytes'] == int(df[1])


MOUNTNS_PROBE = r'''
import json, os, subprocess, sys, tempfile
sys.path[:0] = json.loads(sys.argv[1])
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _shm_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _mounts
target = tempfile.mkdtemp(prefix='nodeprep-shm-')
try:
    subprocess.check_call(['mount', '-t', 'tmpfs', '-o', 'size=3m,nosuid', 'nodeprep-test', target])
    with open(os.path.join(target, 'blob'), 'wb') as handle:
        handle.write(b'x' * 1048576)
    print(json.dumps(_mounts.shm_facts(_shm_state.read_shm(path=target))))
finally:
    subprocess.call(['umount', target])
    os.rmdir(target)
'''


@pytest.mark.mountns
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('unshare'), reason='needs root and unshare')
def test_private_tmpfs_in_mount_namespace():
    out = subprocess.check_output(['unshare', '--mount', '--propagation', 'private', sys.executable, '-c',
                                   MOUNTNS_PROBE, json.dumps(sys.path)], timeout=60)
    facts = json.loads(out.decode())
    assert facts['mounted'] is True
    assert facts['fstype'] == 'tmpfs'
    assert facts['source'] == 'nodeprep-test'
    assert facts['size_bytes'] == 3 * 1024 ** 2
    assert facts['used_bytes'] == 1024 ** 2
    assert facts['free_bytes'] == 2 * 1024 ** 2
    assert 'size=3072k' in facts['mount_options'] and 'nosuid' in facts['mount_options']


# -- check mode before the GPU memory can be read (fresh node, driver installed in the same run) ----------------------

G = 1024 ** 3
OPTS = ['nosuid', 'nodev']


def line(size, options=('rw', 'nosuid', 'nodev')):
    return {'size_bytes': size, 'options': list(options)}


@pytest.mark.parametrize('shm, kwargs, fstab, live, exact', [
    # Fresh testbed node: 11.5 GiB live (half of RAM), no fstab line, floor 64 GiB: both change whatever the memory.
    ({'size_bytes': 12 * G, 'unlimited': False, 'fstab': None}, {}, True, True, True),
    # Live above the floor: whether it grows depends on the GPU memory.
    ({'size_bytes': 512 * G, 'unlimited': False, 'fstab': None}, {}, True, False, False),
    # An fstab line below the least the role writes (max(floor, live)).
    ({'size_bytes': 12 * G, 'unlimited': False, 'fstab': line(32 * G)}, {}, True, True, True),
    ({'size_bytes': 100 * G, 'unlimited': False, 'fstab': line(80 * G)}, {}, True, False, False),
    # An fstab line at or above that: unknown.
    ({'size_bytes': 12 * G, 'unlimited': False, 'fstab': line(717 * G)}, {}, False, True, False),
    # A missing mount option always changes fstab.
    ({'size_bytes': 12 * G, 'unlimited': False, 'fstab': line(717 * G, ('rw',))}, {}, True, True, True),
    # Unlimited and no shrink: left alone; with shrink both change.
    ({'size_bytes': None, 'unlimited': True, 'fstab': None}, {}, False, False, True),
    ({'size_bytes': None, 'unlimited': True, 'fstab': None}, {'shrink': True}, True, True, True),
    # Shrink: fstab below the floor changes; live above the floor is unknown.
    ({'size_bytes': 12 * G, 'unlimited': False, 'fstab': line(32 * G)}, {'shrink': True}, True, True, True),
    ({'size_bytes': 512 * G, 'unlimited': False, 'fstab': line(100 * G)}, {'shrink': True}, False, False, False),
    # Turned off: nothing.
    ({'size_bytes': 12 * G, 'unlimited': False, 'fstab': None}, {'fstab': False, 'remount': False}, False, False,
     True),
])
def test_predict_before_gpu_memory(shm, kwargs, fstab, live, exact):
    got = _shm.predict_before_gpu_memory(shm, 64 * G, OPTS, **kwargs)
    assert (got['fstab'], got['live'], got['exact']) == (fstab, live, exact)
    assert (len(got['fstab_reasons']), len(got['live_reasons'])) == (int(fstab), int(live))


@pytest.mark.parametrize('value, result', [
    (None, None), ('', None), (1024, 1024), ('64G', 64 * G), ('64g', 64 * G), ('64GiB', 64 * G), ('64GB', 64 * G),
    ('65536M', 64 * G), ('1.5T', 1536 * G), ('4096k', 4 * 1024 * 1024), ('1P', 1024 ** 5), ('4096B', 4096),
])
def test_parse_size(value, result):
    assert _shm.parse_size(value, 'nodeprep_shm_size') == result


@pytest.mark.parametrize('value', [True, '50%', '64ib', '64 gigs', '64X', '-1G'])
def test_parse_size_errors(value):
    with pytest.raises(S.ShmError) as exc:
        _shm.parse_size(value, 'nodeprep_shm_min_size')
    assert str(exc.value) == ('nodeprep_shm_min_size: {0!r} is not a size; use bytes, or a number with K, M, G, T or P '
                              '(base 1024; KiB/KB forms too)'.format(value))
