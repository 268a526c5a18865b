# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The NVIDIA DKMS builds a kernel needs before the node may boot it (plugins/module_utils/rules/_dkms.py, R24), on
``dkms status`` lines of the shapes real dkms prints (dell/dkms ``do_status``: ``$m/$v, $k, $a: $status`` since
2.8.6, commit f83b758; ``$m, $v, $k, $a: $status`` and ``$m, $v: added`` before; ``$m/$v: added`` since 3.0.0) and
public captures (REALITY.md R8: NVIDIA's Ubuntu packages, Debian 13), parsed by _dkms_status.parse_dkms_status."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dkms as D
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dkms_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dkms_status as K
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _kernel_state

EL = '6.12.0-55.el10.x86_64'
ML = '6.16.7-1.el10.elrepo.x86_64'
# dkms 3.x (the shape of public captures: `nvidia/580.173.02, 6.8.0-136-generic, x86_64: installed`).
STATUS_3 = ('nvidia-open/580.95.05, {0}, x86_64: installed\n'.format(EL))
STATUS_3_BOTH = STATUS_3 + 'nvidia-open/580.95.05, {0}, x86_64: installed\n'.format(ML)
# dkms 2.8.6-2.8.8: slash for a built module, comma for one only added.
STATUS_286 = 'nvidia, 570.86.15: added\nzfs/2.1.5, {0}, x86_64: installed\n'.format(EL)
# dkms 2.8.5 and older.
STATUS_OLD = 'nvidia, 535.161.08, {0}, x86_64: installed\nnvidia, 535.161.08, {1}, x86_64: built\n'.format(EL, ML)
DEBIAN = 'nvidia-current-open/550.163.01, 6.12.73+deb13-amd64, x86_64: installed\n'
# A make.log as dkms 3.x begins it (do_build: "DKMS (@RELEASE_STRING@) make.log for $module/$module_version for
# kernel $kernelver ($arch)", then `date`); the make lines after it are the fleet's imitation (a guess).
LOG = ('DKMS (dkms-3.2.2) make.log for nvidia-open/580.95.05 for kernel {0} (x86_64)\n'
       'Mon Dec  1 10:00:00 UTC 2026\n\nBuilding module(s)\n'.format(ML)
       + ''.join('line {0}\n'.format(i) for i in range(30))
       + 'make[1]: *** [Makefile:89: modules] Error 2\n# exit code: 2\n')


@pytest.mark.parametrize('name, text, running, target, needed, missing', [
    ('same kernel: nothing to build', STATUS_3, EL, EL, [], []),
    ('3.x, not built for the target', STATUS_3, EL, ML, ['nvidia-open/580.95.05'], ['nvidia-open/580.95.05']),
    ('3.x, built for both', STATUS_3_BOTH, EL, ML, ['nvidia-open/580.95.05'], []),
    ('2.8.6 mixed: NVIDIA only added, zfs ignored', STATUS_286, EL, ML, ['nvidia/570.86.15'], ['nvidia/570.86.15']),
    ('2.8.5: built but not installed for the target', STATUS_OLD, EL, ML, ['nvidia/535.161.08'],
     ['nvidia/535.161.08']),
    ('Debian module name', DEBIAN, '6.12.73+deb13-amd64', '6.12.74+deb13-amd64', ['nvidia-current-open/550.163.01'],
     ['nvidia-current-open/550.163.01']),
    ('no NVIDIA module: nothing to build', 'zfs/2.1.5, {0}, x86_64: installed\n'.format(EL), EL, ML, [], []),
    ('no dkms at all', '', EL, ML, [], []),
])
def test_needed_for_on_status_captures(name, text, running, target, needed, missing):
    assert D.needed_for(K.parse_dkms_status(text), running, target) == (needed, missing)


def test_needed_for_takes_the_modules_of_the_running_kernel_only():
    entries = K.parse_dkms_status(STATUS_3 + 'nvidia-open/570.86.15: added\n')
    assert D.needed_for(entries, EL, ML) == (['nvidia-open/580.95.05'], ['nvidia-open/580.95.05'])


def test_make_log_path_is_the_one_dkms_writes():
    assert _dkms_status.make_log_path('nvidia', '580.119.02') == '/var/lib/dkms/nvidia/580.119.02/build/make.log'


def test_log_kernel_and_tail():
    assert D.log_kernel(LOG) == ML
    assert D.log_kernel('no header\n') is None
    tail = D.log_tail(LOG)
    assert len(tail) == D.LOG_LINES and tail[-1] == '# exit code: 2' and tail[-2].startswith('make[1]: ***')


def test_failed_builds_only_for_a_log_of_the_target():
    missing = ['nvidia-open/580.95.05']
    assert list(D.failed_builds(missing, {'nvidia-open/580.95.05': LOG}, ML)) == missing
    assert D.failed_builds(missing, {'nvidia-open/580.95.05': LOG}, '7.0.4-1.el10.elrepo.x86_64') == {}
    assert D.failed_builds(missing, {}, ML) == {}


def test_build_error_names_host_kernels_log_and_fix():
    failed = D.failed_builds(['nvidia-open/580.95.05'], {'nvidia-open/580.95.05': LOG}, ML)
    msg = D.build_error('node1', ML, EL, ['nvidia-open/580.95.05'], failed, True)
    for part in ('kernel on node1', ML, EL + ' stays the default boot entry', 'it is not rebooted',
                 '/var/lib/dkms/nvidia-open/580.95.05/build/make.log ends:',
                 'make[1]: *** [Makefile:89: modules] Error 2', 'nodeprep_kernel_source'):
        assert part in msg
    msg = D.build_error('node1', ML, EL, ['nvidia-open/580.95.05'], {}, False)
    assert 'is not a log of a build for it' in msg and 'the boot loader still boots ' + ML in msg


def test_dkms_logs_reads_the_make_log_of_a_failed_build(tmp_path):
    log = tmp_path / 'var/lib/dkms/nvidia-open/580.95.05/build/make.log'
    log.parent.mkdir(parents=True)
    log.write_text(LOG)
    entries = K.parse_dkms_status(STATUS_3 + 'zfs/2.1.5: added\n')
    assert _kernel_state.dkms_logs(str(tmp_path), entries) == {'nvidia-open/580.95.05': LOG}
    # A long log keeps its first line (the kernel) and its end.
    log.write_text(LOG + 'x' * 200 + '\n' + 'the end\n')
    got = _kernel_state.dkms_logs(str(tmp_path), entries, limit=100)['nvidia-open/580.95.05']
    assert D.log_kernel(got) == ML and got.endswith('the end\n')
    os.remove(str(log))
    assert _kernel_state.dkms_logs(str(tmp_path), entries) == {}
