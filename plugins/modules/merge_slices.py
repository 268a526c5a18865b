#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/merge_slices.py;
# this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: merge_slices
short_description: Merge the slices of a sliced run into the one readiness report and the one run summary
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - A run of C(gpufleet.nodeprep.site) or C(gpufleet.nodeprep.readiness) as N slices (AWX or Automation Platform
    job slicing, detected, or N C(ansible-runner) runs with C(nodeprep_sliced=true)) leaves each slice's part in
    C(<dest>/slices/<run id>/<slice id>/) - its C(report.json) (readiness) and C(run-summary.json) (site). This
    action, run once after the slices, reads those parts of run O(run_id) and writes into O(dest) what an unsliced
    run of the same hosts writes there - C(report.json), C(junit.xml), C(report.html), C(report.txt),
    C(readiness.prom), C(exit-status) and C(run-summary.json) - with the same renderers.
  - The merge reads only the slices' files. A host that two slices name is refused; a host of O(hosts) that no slice
    names is reported as not checked (readiness) and failed (summary), saying that its slice did not finish, so that a
    lost slice never makes a smaller fleet look healthy.
  - The hosts are in the order of O(hosts) (the inventory's, as the unsliced run's play has them), then the hosts
    only the slices name, by name.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
options:
  dest:
    description:
      - The directory the slices wrote under (their C(nodeprep_readiness_report_dir)), and where the merged files go.
      - Defaults to C(nodeprep_readiness_report_dir), else C(./readiness-report).
    type: path
  run_id:
    description:
      - The run whose slices to merge. Defaults to C(nodeprep_run_id) - in an AWX workflow the artifact the slices
        left for the next node (the slice workflow's C(awx_workflow_job_id)). Never the merge job's own AWX ids.
      - Without one the task fails, listing the runs with slices in O(dest).
    type: str
  hosts:
    description:
      - The hosts the run was for, in order (the playbook gives the inventory's hosts of C(nodeprep_hosts)).
    type: list
    elements: str
    default: []
  prometheus_textfile:
    description:
      - Also write C(readiness.prom) to this C(.prom) file for node_exporter's textfile collector (the slices do not).
      - Defaults to C(nodeprep_readiness_prometheus_textfile).
    type: path
  keep:
    description:
      - Keep C(<dest>/slices/<run id>/) after the merge (by default it is removed once the merged files are written).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Writes the files in check mode too (it changes no node).
  diff_mode:
    support: N/A
    details:
      - Nothing on a node changes.
  action:
    support: full
    description: Runs on the controller through an action plugin.
notes:
  - Always returns C(changed=false); it never connects to a node.
  - Docs - docs/awx.md (Running on AWX, AAP and ansible-runner).
seealso:
  - module: gpufleet.nodeprep.readiness_report
  - module: gpufleet.nodeprep.run_summary
"""

EXAMPLES = r"""
- name: Merge the slices of run 4711 into ./readiness-report
  gpufleet.nodeprep.merge_slices:
    run_id: "4711"
    hosts: "{{ query('ansible.builtin.inventory_hostnames', 'all') }}"
  register: merged

- name: Print the merged matrix and summary
  ansible.builtin.debug:
    msg: "{{ merged.lines }}"
"""

RETURN = r"""
run_id:
  description: The run merged.
  returned: always
  type: str
  sample: "4711"
dest:
  description: Absolute path of the directory written.
  returned: always
  type: str
slices:
  description: The slice ids found (AWX job ids), sorted.
  returned: always
  type: list
  elements: str
  sample: ["4712", "4713", "4714"]
files:
  description: The files written.
  returned: always
  type: list
  elements: str
summary:
  description: The merged readiness report's counts (C(report.json) C(summary)).
  returned: when a slice wrote a readiness report
  type: dict
exit_status:
  description: The merged report's exit status (0 all ready, 1 some not ready, 2 some not checked).
  returned: when a slice wrote a readiness report
  type: int
exit_status_meaning:
  description: What RV(exit_status) means.
  returned: when a slice wrote a readiness report
  type: str
run_summary:
  description: The merged C(run-summary.json).
  returned: when a slice wrote a run summary
  type: dict
lines:
  description: The merged readiness matrix and run summary as lines to print.
  returned: always
  type: list
  elements: str
"""
