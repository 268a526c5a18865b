# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/rules/_nccl.py: the one NCCL name list and the /etc/nccl.conf format (NVIDIA/nccl param.cc)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _nccl as n


def test_one_list():
    assert len(n.NCCL_NAMES) == 159
    assert 'NCCL_CONF_FILE' not in n.NCCL_NAMES
    assert {'NCCL_DEBUG', 'NCCL_IB_HCA', 'NCCL_GDR_FLUSH_DISABLE', 'NCCL_SOCKET_IFNAME'} <= n.NCCL_NAMES
    legacy = {'NCCL_ASYNC_ERROR_HANDLING', 'NCCL_BLOCKING_WAIT', 'NCCL_DESYNC_DEBUG'}
    assert not (n.NCCL_NAMES & (n.TORCH_NAMES - legacy))


@pytest.mark.parametrize('value, text', [
    (True, '1'), (False, '0'), (22, '22'), (0.5, '0.5'), ('WARN', 'WARN'), ('=mlx5_0,mlx5_1', '=mlx5_0,mlx5_1'),
    ('/scratch/nccl logs/%h.%p', '/scratch/nccl logs/%h.%p'),
])
def test_conf_value(value, text):
    assert n.conf_value('NCCL_X', value) == text


@pytest.mark.parametrize('value, message', [
    (None, 'nodeprep_nccl_conf.NCCL_X is null; NCCL would read an empty value as unset: remove the name or give a '
           'value'),
    ('', 'nodeprep_nccl_conf.NCCL_X is empty; NCCL reads an empty value as unset: remove the name or give a value'),
    ('WARN ', "nodeprep_nccl_conf.NCCL_X: 'WARN ' starts or ends with white space, which NCCL keeps as part of the "
              "value; remove it"),
    ('a\nb', "nodeprep_nccl_conf.NCCL_X: 'a\\nb' spans more than one line; NCCL reads one NAME=value per line"),
    ([1], 'nodeprep_nccl_conf.NCCL_X: [1] is not a string, number or boolean'),
    ('x' * 1024, 'nodeprep_nccl_conf.NCCL_X: the value has 1024 characters; NCCL reads at most 1023'),
])
def test_conf_value_refused(value, message):
    with pytest.raises(n.NcclError) as exc:
        n.conf_value('NCCL_X', value)
    assert str(exc.value) == message


def test_render_conf_has_no_comment_and_sorted_lines():
    text = n.render_conf({'NCCL_IB_DISABLE': True, 'NCCL_DEBUG': 'WARN'}, socket_ifnames=['ens1f0np0', 'ens1f1np1'])
    assert text == 'NCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME==ens1f0np0,ens1f1np1\n'
    assert '#' not in text


def test_conf_file_is_refused():
    with pytest.raises(n.NcclError) as exc:
        n.render_conf({'NCCL_CONF_FILE': '/shared/nccl.conf'})
    assert str(exc.value).startswith('nodeprep_nccl_conf.NCCL_CONF_FILE: NCCL reads it from the environment only')


def test_socket_ifname_both_ways():
    with pytest.raises(n.NcclError) as exc:
        n.render_conf({'NCCL_SOCKET_IFNAME': 'eth0'}, socket_ifnames=['eth1'])
    assert str(exc.value) == ('nodeprep_nccl_conf.NCCL_SOCKET_IFNAME and nodeprep_nccl_socket_networks are both '
                              'set (choose one)')


def test_name_problems():
    assert n.name_problems({'NCCL_TIMEOUT': 1, 'TORCH_NCCL_BLOCKING_WAIT': 1, 'NCCL_NEW_THING': 1, 'NCCL_DEBUG': 1},
                           {'PYTORCH_NO_CUDA_MEMORY_CACHING': 0}, ['NCCL_NEW_THING']) == [
        "nodeprep_nccl_conf.NCCL_TIMEOUT: NCCL never reads it; PyTorch's collective timeout is set in code "
        "(init_process_group(timeout=...))",
        'nodeprep_nccl_conf.TORCH_NCCL_BLOCKING_WAIT: read by PyTorch at start-up, before NCCL loads /etc/nccl.conf; '
        'put it in nodeprep_nccl_torch_env',
        'nodeprep_nccl_torch_env.PYTORCH_NO_CUDA_MEMORY_CACHING: a debug switch: in several PyTorch versions any '
        'value, even 0, turns the CUDA caching allocator off',
    ]
