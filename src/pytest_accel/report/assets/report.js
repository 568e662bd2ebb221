// Sorting and search for the report's tables; the page reads without it.
document.querySelectorAll('table.sortable').forEach(function(table){
  var search=document.getElementById(table.id+'-search');
  if(search){search.classList.remove('hidden');search.addEventListener('input',function(){
    var q=search.value.toLowerCase();
    table.querySelectorAll('tbody tr').forEach(function(r){r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':'';});
  });}
  table.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(){
    var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows),up=th.dataset.up!=='1';
    rows.sort(function(a,b){var x=a.cells[col].dataset.v||a.cells[col].textContent,y=b.cells[col].dataset.v||b.cells[col].textContent;
      var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return up?c:-c;});
    th.dataset.up=up?'1':'0';rows.forEach(function(r){body.appendChild(r);});
  });});
});
