# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/collect/_limits.py and _limits_tree.py (limits_facts' tree and groups options): the
node returns what it read (no judgement); the resolution is parsers/_limits_conf.resolve (tested there and through
limits_facts)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _limits as C
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _limits_tree as T
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _limits_conf as L

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, FakeModule, read_fixture

SLURMD_LIMITS = read_fixture('host', 'slurmd-limits.slurm22.05-el9')
SCONTROL = read_fixture('host', 'scontrol-show-config.slurm22.05')
TOOLS = {'systemctl': '/usr/bin/systemctl', 'scontrol': '/usr/bin/scontrol', 'timeout': '/usr/bin/timeout'}


def tree(tmp_path):
    sec = tmp_path / 'etc/security/limits.d'
    sec.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, 'host', 'limits.conf.el9'), str(tmp_path / 'etc/security/limits.conf'))
    (sec / '90-nodeprep-memlock.conf').write_text(u'*\t-\tmemlock\tunlimited\nroot\t-\tmemlock\tunlimited\n')
    (sec / '99-site.conf').write_text(u'* hard memlock 65536\n')
    (sec / '95-gone.conf').symlink_to('/nonexistent/95-gone.conf')
    (tmp_path / 'etc/passwd').write_text(u'root:x:0:0:root:/root:/bin/bash\ntrain:x:1000:1000::/home/train:/bin/sh\n')
    (tmp_path / 'etc/group').write_text(u'root:x:0:\ntrain:x:1000:\nrdma:x:2000:train\n')
    return str(tmp_path)


def test_the_node_returns_the_text_it_read_and_judges_nothing(tmp_path):
    root = tree(tmp_path)
    read = T.read_limits(FakeModule(TOOLS, []), users=['train', '*', 'nobody-here'], root=root)
    assert [(os.path.basename(f['path']), f['error'] is None) for f in read['files']] == [
        ('limits.conf', True), ('90-nodeprep-memlock.conf', True), ('95-gone.conf', False), ('99-site.conf', True)]
    assert read['files'][3]['text'] == u'* hard memlock 65536\n'
    assert read['files'][2]['error'] == (root + '/etc/security/limits.d/95-gone.conf: cannot read: dangling symlink '
                                         'to /nonexistent/95-gone.conf')
    # The accounts the resolution needs: the uid, the primary group and every group naming the user.
    assert read['accounts'] == {'train': {'uid': 1000, 'gid': 1000, 'groups': ['rdma', 'train'],
                                          'gids': [1000, 2000]},
                                '*': {'uid': None, 'gid': None, 'groups': [], 'gids': []},
                                'nobody-here': None}
    assert read['debian'] is False
    # A tree: systemd is not asked, and no slurmd is looked for.
    assert read['systemd']['reason'] == 'root is {0}: systemd is not asked about a tree'.format(root)
    assert read['slurm'] is None


def test_any_user_gets_only_the_star_lines(tmp_path):
    """The site file read after the role's own: every ordinary user is at 64 MiB, root is not (its own line)."""
    root = tree(tmp_path)
    read = T.read_limits(FakeModule(TOOLS, []), users=['root', '*', 'train'], root=root)
    read['files'] = [f for f in read['files'] if f['error'] is None]
    limits = L.resolve(read)
    # pam_limits clamps the soft value (unlimited, from the role's line) to the hard one of the later file, so
    # both come from that file.
    assert limits['effective']['*']['memlock'] == {'soft': 65536, 'hard': 65536}
    assert limits['sources']['*']['memlock'] == {'soft': root + '/etc/security/limits.d/99-site.conf:1',
                                                 'hard': root + '/etc/security/limits.d/99-site.conf:1'}
    assert limits['effective']['train']['memlock'] == {'soft': 65536, 'hard': 65536}
    assert limits['effective']['root']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}


def test_groups_override_replaces_the_databases(tmp_path):
    root = tree(tmp_path)
    account = T.read_account('newbie', root, {'groups': ['rdma'], 'uid': 1500, 'gid': None})
    assert account == {'uid': 1500, 'gid': None, 'groups': ['rdma'], 'gids': [2000]}
    # A known user: the tree's uid and primary group stay where the option leaves them out.
    account = T.read_account('train', root, {'groups': ['rdma'], 'uid': None, 'gid': None})
    assert account == {'uid': 1000, 'gid': 1000, 'groups': ['rdma'], 'gids': [1000, 2000]}


def test_this_systems_accounts():
    """What the gather reads (collect/_limits.read_account): pwd and grp of the running system."""
    assert C.read_account('root')['uid'] == 0 and 0 in C.read_account('root')['gids']
    assert C.read_account('root') == T.read_account('root')
    assert C.read_account('no-such-user-npml') is None
    assert C.read_account('*') == {'uid': None, 'gid': None, 'groups': [], 'gids': []}


def proc_tree(tmp_path, processes):
    proc = tmp_path / 'proc'
    for pid, (comm, limits) in processes.items():
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / 'comm').write_text(comm + u'\n')
        if limits is not None:
            (proc / str(pid) / 'limits').write_text(limits)
    (proc / 'sys').mkdir()
    return str(proc)


def test_no_slurmd_no_command(tmp_path):
    module = FakeModule(TOOLS, [])
    assert C.read_slurm(module, proc_tree(tmp_path, {1: ('systemd', None), 77: ('slurmstepd', None)})) is None
    assert module.seen == []


def test_slurmd_limits_and_the_propagation_lines(tmp_path):
    module = FakeModule(TOOLS, [(0, SCONTROL, '')])
    read = C.read_slurm(module, proc_tree(tmp_path, {1: ('systemd', None), 812: ('slurmd', SLURMD_LIMITS)}))
    assert module.seen == [['/usr/bin/timeout', '--kill-after=5', '--signal=TERM', '20', '/usr/bin/scontrol', 'show',
                            'config']]
    assert read['slurmd'] == [{'pid': 812, 'limits': SLURMD_LIMITS}]
    # Only the Propagate* lines come back (the whole configuration is some hundred lines per node).
    assert read['config'] == [line for line in SCONTROL.splitlines() if line.startswith('Propagate')]
    assert len(read['config']) == 3 and read['config_error'] is None


def test_scontrol_failing_is_said(tmp_path):
    stderr = 'slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n'
    module = FakeModule(TOOLS, [(1, '', stderr)])
    read = C.read_slurm(module, proc_tree(tmp_path, {812: ('slurmd', SLURMD_LIMITS)}))
    assert read['config'] is None
    assert read['config_error'] == ('scontrol show config failed (rc=1): slurm_load_ctl_conf error: Unable to contact '
                                    'slurm controller (connect failure)')
    module = FakeModule(dict(TOOLS, scontrol=None), [])
    assert C.read_slurm(module, proc_tree(tmp_path / 'b', {812: ('slurmd', None)})) == {
        'slurmd': [{'pid': 812, 'limits': None}], 'config': None,
        'config_error': 'scontrol not found in PATH nor beside slurmd'}


def test_scontrol_beside_a_slurmd_outside_path(tmp_path):
    """A site's own build under /opt/slurm: scontrol is not in PATH, but in the bin/ beside slurmd's sbin/."""
    prefix = tmp_path / 'opt' / 'slurm'
    (prefix / 'sbin').mkdir(parents=True)
    (prefix / 'bin').mkdir()
    (prefix / 'sbin' / 'slurmd').write_text(u'')
    (prefix / 'bin' / 'scontrol').write_text(u'')
    os.chmod(str(prefix / 'bin' / 'scontrol'), 0o755)
    proc = proc_tree(tmp_path, {812: ('slurmd', SLURMD_LIMITS)})
    os.symlink(str(prefix / 'sbin' / 'slurmd'), os.path.join(proc, '812', 'exe'))
    module = FakeModule(dict(TOOLS, scontrol=None), [(0, SCONTROL, '')])
    read = C.read_slurm(module, proc)
    assert module.seen[0][-3:] == [str(prefix / 'bin' / 'scontrol'), 'show', 'config']
    assert read['config_error'] is None and len(read['config']) == 3


def test_a_slurmd_of_another_pid_namespace_is_not_this_nodes(tmp_path):
    """The host sees its containers' processes: a slurmd in another PID namespace is not this system's."""
    proc = proc_tree(tmp_path, {812: ('slurmd', SLURMD_LIMITS), 900: ('slurmd', SLURMD_LIMITS)})
    os.makedirs(os.path.join(proc, 'self', 'ns'))
    os.symlink('pid:[4026531836]', os.path.join(proc, 'self', 'ns', 'pid'))
    os.makedirs(os.path.join(proc, '812', 'ns'))
    os.symlink('pid:[4026531836]', os.path.join(proc, '812', 'ns', 'pid'))
    os.makedirs(os.path.join(proc, '900', 'ns'))
    os.symlink('pid:[4026532999]', os.path.join(proc, '900', 'ns', 'pid'))
    read = C.read_slurm(FakeModule(TOOLS, [(0, SCONTROL, '')]), proc)
    assert [entry['pid'] for entry in read['slurmd']] == [812]


def test_scontrol_that_cannot_run_is_said(tmp_path):
    """timeout(1) missing: the runner cannot start scontrol; the read says so instead of failing the subset."""
    module = FakeModule(dict(TOOLS, timeout=None), [])
    read = C.read_slurm(module, proc_tree(tmp_path, {812: ('slurmd', SLURMD_LIMITS)}))
    assert read['config'] is None
    assert read['config_error'] == ('cannot run /usr/bin/scontrol show config with a timeout: timeout (coreutils) was '
                                    'not found in PATH')
