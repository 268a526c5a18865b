#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/readiness_verdict.py (it runs
# gpufleet.nodeprep.readiness_textfile on the node when asked); this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: readiness_verdict
short_description: Act on a node's readiness verdict - publish it for node_exporter, fail the node when it is not ready
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - The last per-node step of the P(gpufleet.nodeprep.readiness#role) role, in one task, after the report and the
    Slurm step have read every node's result.
  - When C(nodeprep_readiness_node_textfile) is true, writes the node's verdict for its node_exporter with
    M(gpufleet.nodeprep.readiness_textfile) (at C(nodeprep_readiness_node_textfile_path)); not on a node that could not
    be reached.
  - Then, when C(nodeprep_readiness_fail) is true (the default), the node fails when a check failed (naming the
    failed checks) or when it could not be checked (with the reason).
  - The three variables are typed here with the readiness role's argument spec (C(-e nodeprep_readiness_fail=false)
    is false); a value that does not type fails the node naming it and the values allowed, before anything is
    written.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
options:
  result:
    description:
      - The node's readiness result - what M(gpufleet.nodeprep.readiness_info) returned (registered), or the failure
        or unreachable result Ansible registered for a node that could not be checked.
    type: raw
    required: true
attributes:
  action:
    support: full
    description: Runs on the controller through an action plugin; the node textfile is written on the node.
  check_mode:
    support: full
    details:
      - The node textfile is predicted (M(gpufleet.nodeprep.readiness_textfile) in check mode); the verdict fails the
        node as in a real run.
  diff_mode:
    support: full
seealso:
  - module: gpufleet.nodeprep.readiness_info
  - module: gpufleet.nodeprep.readiness_textfile
"""

EXAMPLES = r"""
- name: Check each node
  gpufleet.nodeprep.readiness_info:
  register: nodeprep_readiness
  ignore_unreachable: true
  ignore_errors: true

- name: Publish each node's verdict (nodeprep_readiness_node_textfile) and fail the nodes that are not ready
  gpufleet.nodeprep.readiness_verdict:
    result: "{{ nodeprep_readiness }}"
"""

RETURN = r"""
ready:
  description: Whether the node is ready (no check failed and it could be checked).
  returned: when the settings type
  type: bool
  sample: false
textfile:
  description: What M(gpufleet.nodeprep.readiness_textfile) did - C(path) and C(changed).
  returned: when C(nodeprep_readiness_node_textfile) is true and the node could be reached
  type: dict
  sample: {"path": "/var/lib/node_exporter/textfile_collector/nodeprep.prom", "changed": false}
msg:
  description: Why the node fails - the failed checks, why it could not be checked, or a setting that does not type.
  returned: on failure
  type: str
  sample: "gpu-a01 is not ready: gpu.count failed (details in the report; nodeprep_readiness_fail=false reports
    without failing)."
"""
