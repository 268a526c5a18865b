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


# ------------------------------------------------------------------ an unknown DKMS state (dkms-project/dkms#352)

def _capture(name):
    """stdout, stderr and exit status of a real ``dkms status`` (tests/fixtures/SOURCES.md, host/dkms-status.*)."""
    base = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'fixtures', 'host', name)
    return tuple(open(base + '.' + part).read() for part in ('stdout', 'stderr', 'rc'))


UBUNTU_K = '6.8.0-60-generic'
STALE_TREE = [{'module': 'nvidia', 'version': '535.104.05', 'source': False},
              {'module': 'nvidia', 'version': '580.95.05', 'source': True}]
LOADED = {'loaded': True, 'version': '580.95.05', 'flavour': 'open'}
NVIDIA_DKMS_PACKAGE = {'nvidia-dkms-580-open': [{'version': '580.95.05-0ubuntu1'}]}


def _state(capture, tree=None, module=None, rc=None):
    stdout, stderr, code = _capture(capture) if capture else ('', '', '0')
    entries, problems = K.read_dkms_status(stdout)
    status = {'ran': True, 'rc': int(code) if rc is None else rc, 'stderr': stderr.strip(), 'problems': problems}
    return {'running': UBUNTU_K, 'dkms': entries, 'dkms_status': status, 'dkms_tree': tree or [],
            'nvidia_module': module or {'loaded': False}}


def test_the_stale_tree_captures_list_nothing_or_only_what_sorts_first():
    """dkms 3.0.10 (Debian 12's package) on a tree with a version whose source is gone: it stops listing there,
    says so on stderr only, exits 0."""
    stdout, stderr, rc = _capture('dkms-status.stale-first')
    assert (K.read_dkms_status(stdout), rc.strip()) == (([], []), '0')
    assert stderr.startswith('Error! Could not locate dkms.conf file.\nFile: /var/lib/dkms/nvidia/535.104.05/source')
    stdout, stderr, rc = _capture('dkms-status.stale-last')
    entries, problems = K.read_dkms_status(stdout)
    assert [(e['module'], e['version'], e['kernel'], e['status']) for e in entries] == [
        ('nvidia', '580.95.05', UBUNTU_K, 'installed')] and problems == []


@pytest.mark.parametrize('name, state, packages, words', [
    ('the issue: a stale tree sorts first, nothing listed, the driver loaded',
     _state('dkms-status.stale-first', STALE_TREE, LOADED), NVIDIA_DKMS_PACKAGE,
     ['/var/lib/dkms holds nvidia/535.104.05 (its source link does not resolve',
      'DKMS driver packages are installed (nvidia-dkms-580-open)', 'the NVIDIA module 580.95.05 is loaded',
      'it printed on stderr: Error! Could not locate dkms.conf file.', 'dkms-project/dkms#352']),
    ('dkms status failed', _state(None, rc=3), {'kmod-nvidia-open-dkms': [{'version': '580.95.05'}]},
     ['dkms status exited 3', 'DKMS driver packages are installed (kmod-nvidia-open-dkms)']),
    ('a line dkms status printed that cannot be read is no NVIDIA module',
     dict(_state(None, module=LOADED), dkms_status={'ran': True, 'rc': 0, 'stderr': '', 'problems': [
         "dkms status line 1: cannot parse 'nvidia/580.95.05 6.8.0-60-generic x86_64 installed'"]}), {},
     ['lines it could not read: dkms status line 1', 'the NVIDIA module 580.95.05 is loaded and no package provides '
      'it for ' + UBUNTU_K]),
    ('a runfile driver without DKMS: loaded, nothing listed', _state(None, module=LOADED), {},
     ['the NVIDIA module 580.95.05 is loaded', 'dkms status printed no NVIDIA line and exited 0']),
    ('dkms not installed at all', dict(_state(None, module=LOADED), dkms_status={'ran': False, 'missing': True}), {},
     ['(dkms is not installed)']),
])
def test_unknown_dkms_state(name, state, packages, words):
    reason = D.unknown_state(state, packages)
    for word in words:
        assert word in reason, (name, word, reason)
    msg = D.unknown_error('node1', ML, EL, reason, True)
    assert msg.startswith('kernel on node1: dkms status lists no NVIDIA module') and 'is not rebooted and ' + EL + \
        ' stays the default boot entry' in msg and 'dkms remove <module>/<version> --all' in msg


@pytest.mark.parametrize('name, state, packages', [
    ('the stale tree sorts last: the NVIDIA module is listed, the usual check applies',
     _state('dkms-status.stale-last', STALE_TREE, LOADED), NVIDIA_DKMS_PACKAGE),
    ('no NVIDIA driver at all', _state(None), {}),
    ("Ubuntu's signed modules for the running kernel: no DKMS", _state(None, module=LOADED),
     {'linux-modules-nvidia-580-server-open-' + UBUNTU_K: [{'version': '6.8.0-60.63+1'}]}),
    ('the driver removed (dpkg rc: no records)', _state(None), {'nvidia-dkms-580-open': []}),
])
def test_known_dkms_state(name, state, packages):
    assert D.unknown_state(state, packages) == '', name


@pytest.mark.parametrize('name', ['nvidia-dkms-580-open', 'nvidia-dkms-open', 'nvidia-dkms-580-server-open',
                                  'kmod-nvidia-open-dkms', 'kmod-nvidia-latest-dkms', 'nvidia-kernel-dkms',
                                  'nvidia-open-kernel-dkms', 'nvidia-tesla-535-kernel-dkms'])
def test_dkms_driver_packages(name):
    assert D.dkms_packages({name: [{'version': '1'}], 'nvidia-kernel-common-580': [{'version': '1'}],
                            'dkms': [{'version': '3.0.11'}]}) == [name]


def test_read_dkms_status_keeps_what_it_can_read():
    """An unparsable line is reported, not fatal: the gather's reading (parse_dkms_status still raises)."""
    text = 'garbage\n' + STATUS_3 + 'nvidia: installed\n'
    entries, problems = K.read_dkms_status(text)
    assert entries == K.parse_dkms_status(STATUS_3)
    assert problems == ["dkms status line 1: cannot parse 'garbage'",
                        "dkms status line 3: no module version in 'nvidia: installed'"]
    with pytest.raises(K.KernelError):
        K.parse_dkms_status(text)
