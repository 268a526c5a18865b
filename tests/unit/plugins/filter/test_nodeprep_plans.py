# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import os

import pytest

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import get_hash

from ansible_collections.gpufleet.nodeprep.plugins.filter import nodeprep_plans as fp
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _node_state as ns

CONF = u'NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\n'


def test_filters_are_registered():
    assert sorted(fp.FilterModule().filters()) == [
        'nodeprep_path_changes', 'nodeprep_unit_names']


@pytest.fixture
def tree(tmp_path):
    conf = tmp_path / 'nccl.conf'
    conf.write_text(CONF)
    os.chmod(str(conf), 0o644)
    folder = tmp_path / 'd'
    folder.mkdir()
    os.chmod(str(folder), 0o755)
    os.symlink(str(conf), str(tmp_path / 'link'))
    return tmp_path


def wants(tree, sha1=None, mode='0644', uid=None):
    uid = os.getuid() if uid is None else uid
    gid = os.getgid()
    return [
        {'path': str(tree / 'nccl.conf'), 'sha1': sha1 or get_hash(CONF, 'sha1'), 'mode': mode, 'uid': uid,
         'gid': gid},
        {'path': str(tree / 'd'), 'state': 'directory', 'mode': '0755', 'uid': uid, 'gid': gid},
        {'path': str(tree / 'link'), 'state': 'link', 'src': str(tree / 'nccl.conf')},
        {'path': str(tree / 'gone'), 'state': 'absent'},
    ]


def gathered(tree):
    return ns.collect_files([str(tree / 'nccl.conf'), str(tree / 'd'), str(tree / 'link'), str(tree / 'gone')])


def test_nothing_differs_on_a_right_tree(tree):
    assert fp.nodeprep_path_changes(gathered(tree), wants(tree)) == []


@pytest.mark.parametrize('change, reason', [
    (lambda t: (t / 'nccl.conf').write_text(u'NCCL_DEBUG=INFO\n'), 'nccl.conf: content differs'),
    (lambda t: os.chmod(str(t / 'nccl.conf'), 0o600), 'nccl.conf: mode 0600, not 0644'),
    (lambda t: os.remove(str(t / 'nccl.conf')), 'nccl.conf: missing'),
    (lambda t: os.rmdir(str(t / 'd')), 'd: missing'),
    (lambda t: os.chmod(str(t / 'd'), 0o700), 'd: mode 0700, not 0755'),
    (lambda t: (os.remove(str(t / 'link')), os.symlink('/dev/null', str(t / 'link'))), 'link: points to /dev/null, not {tree}/nccl.conf'),
    (lambda t: (t / 'gone').write_text(u'x'), 'gone: exists'),
])
def test_each_difference_is_a_reason(tree, change, reason):
    change(tree)
    # The whole list: one sentence, naming the full path.
    assert fp.nodeprep_path_changes(gathered(tree), wants(tree)) == [str(tree) + '/' + reason.format(tree=tree)]


def test_owner_and_type_differences(tree):
    reasons = fp.nodeprep_path_changes(gathered(tree), wants(tree, uid=os.getuid() + 1)[:1])
    assert reasons == ['{0}: uid {1}, not {2}'.format(tree / 'nccl.conf', os.getuid(), os.getuid() + 1)]
    want = [{'path': str(tree / 'd'), 'sha1': 'x'}]
    assert fp.nodeprep_path_changes(gathered(tree), want) == ['{0}: is a directory, not a file'.format(tree / 'd')]


def test_what_cannot_be_told_is_a_change(tree):
    files = gathered(tree)
    assert fp.nodeprep_path_changes({}, wants(tree)[:1]) == ['{0}: not gathered'.format(tree / 'nccl.conf')]
    files[str(tree / 'nccl.conf')]['sha1'] = None
    assert 'content not known' in fp.nodeprep_path_changes(files, wants(tree)[:1])[0]


def test_sha1_of_a_template_matches_the_gather(tree):
    assert gathered(tree)[str(tree / 'nccl.conf')]['sha1'] == hashlib.sha1(CONF.encode('utf-8')).hexdigest()


@pytest.mark.parametrize('bad, message', [
    ('x', 'wants must be a list'),
    ([{'state': 'file'}], 'each want needs a path'),
    ([{'path': '/x', 'state': 'fifo'}], "state 'fifo' is not file, directory, link or absent"),
])
def test_bad_wants_are_refused(bad, message):
    with pytest.raises(AnsibleFilterError) as err:
        fp.nodeprep_path_changes({}, bad)
    assert message in str(err.value)


def test_glob_gathers_each_match(tree):
    (tree / 'a.env').write_text(u'A')
    (tree / 'b.env').write_text(u'B')
    assert sorted(ns.collect_files([str(tree / '*.env')])) == [str(tree / 'a.env'), str(tree / 'b.env')]


def test_unit_names():
    assert fp.nodeprep_unit_names(['nvidia-persistenced', 'dev-shm.mount']) == [
        'nvidia-persistenced.service', 'dev-shm.mount']
    with pytest.raises(AnsibleFilterError) as err:
        fp.nodeprep_unit_names(['two words'])
    assert "is not a unit name" in str(err.value)


def test_node_sha1_matches_the_hash_filter(tmp_path):
    """The controller compares `content | hash('sha1')` with the sha1 gpu_node_facts read on the node."""
    from ansible.plugins.filter.core import get_hash
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _node_state
    text = u'NCCL_SOCKET_IFNAME=ib0\nNCCL_IB_HCA=mlx5\n'
    path = tmp_path / 'f'
    path.write_text(text)
    assert _node_state.sha1_of(str(path)) == get_hash(text, 'sha1')
